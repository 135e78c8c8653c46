from memoryd.cli.main import main

raise SystemExit(main())
