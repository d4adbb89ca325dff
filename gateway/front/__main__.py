from gateway.front.child import main

raise SystemExit(main())
