"""``python -m integration.conformance``: ksqlDB's statement cases (see ``statements``)."""

import sys

from integration.conformance.statements import main

sys.exit(main())
