"""What the daemon serves from: the engine that wires board, index, model and watcher (:mod:`.engine`), its
slot that loads in the background (:mod:`.warmup`), the index's one writer (:mod:`.indexer`) and its edges
(:mod:`.writequeue`: the queue and read barriers in, the change feed out), the board watcher
(:mod:`.watch`), the registry of record kinds (:mod:`.sources`), the start-up sweep of killed writers' temp files
(:mod:`.sweep`), and the in-process search of a board without a daemon (:mod:`.local`).
"""
