"""`python -m bertbook.pretrain`: the command line of chapter 06 (see bertbook.pretrain.main)."""

import sys

from bertbook.pretrain import main

sys.exit(main())
