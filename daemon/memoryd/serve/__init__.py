"""The daemon process: start-up -> serve -> shutdown (:mod:`.daemon`), its settings (:mod:`.config`), the
single-instance lock (:mod:`.lock`) and socket file (:mod:`.socketfile`), accepted connections (:mod:`.listener`),
one MCP session per connection (:mod:`.session`) with JSON-RPC hygiene before the SDK (:mod:`.jsonrpc`), the
one MCP server object, its tool boundary and the metrics of its calls (:mod:`.app`), and the control line for
``status``/``forget`` (:mod:`.control`).
"""
