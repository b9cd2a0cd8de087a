"""`python -m bertlib.pretrain`: the command line of chapter 06 (see bertlib.pretrain.main)."""

import sys

from bertlib.pretrain import main

sys.exit(main())
