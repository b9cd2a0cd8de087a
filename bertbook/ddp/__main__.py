"""`python -m bertbook.ddp` (under torchrun): chapter 10's data-parallel fine-tuning."""

import sys

from bertbook.ddp import main

sys.exit(main())
