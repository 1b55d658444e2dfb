import sys

from yolo_sm.cli import main

sys.exit(main())
