import sys

from yolo_sm.cli.main import main

sys.exit(main())
