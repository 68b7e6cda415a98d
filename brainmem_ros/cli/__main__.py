"""``python -m brainmem_ros.cli``: the ``brainmem-ros`` command."""
import sys

from brainmem_ros.cli.main import main

sys.exit(main())
