from layerscope.cli import main

raise SystemExit(main())
