"""`python -m bertlib.distributed` (under torchrun): chapter 09's data-parallel fine-tuning."""

import sys

from bertlib.distributed import main

sys.exit(main())
