"""The live index: LanceDB, the embedding model, ranking. Importing the package registers LanceDB's REST
client without its API modules (:mod:`memoryd.index.lean_import`), before any module here imports lancedb."""

from memoryd.index import lean_import

lean_import.register()
