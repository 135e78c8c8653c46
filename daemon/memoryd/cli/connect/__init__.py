"""``memoryd connect|disconnect|doctor|hook``: write memoryd's entry into each agent's config, byte-exactly
reversible (:mod:`.command`, :mod:`.manage`, :mod:`.edits` with :mod:`.jsonedit`/:mod:`.tomledit`,
:mod:`.safewrite`), the agents we know (:mod:`.agents`), the Claude Code Stop hook (:mod:`.hook`) and the
health check of an install (:mod:`.doctor`).
"""
