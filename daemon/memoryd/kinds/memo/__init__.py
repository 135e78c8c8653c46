"""The memo tools: the MCP tutorial's memo server surface (``memo_add``, ``memo_search``) on memories."""
