"""`python -m bertbook.ddp` (under torchrun): chapter 11's data-parallel fine-tuning."""

import sys

from bertbook.ddp import main

sys.exit(main())
