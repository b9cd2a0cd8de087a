"""`python -m bertbook.ddp` (under torchrun): chapter 09's data-parallel fine-tuning."""

import sys

from bertbook.ddp import main

sys.exit(main())
