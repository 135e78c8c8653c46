from memoryd_shim import main

raise SystemExit(main())
