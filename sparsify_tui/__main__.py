from sparsify_tui.cli import main

raise SystemExit(main())
