from seqjit.cli import main

raise SystemExit(main())
