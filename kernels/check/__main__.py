import sys

from kernels.check import main

sys.exit(main())
