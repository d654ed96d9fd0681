import sys

from voicecli.cli import main

sys.exit(main())
