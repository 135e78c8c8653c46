"""The record kinds, one folder each: ``briefs`` (what the developer asked, filed by task, and the outcomes),
``memories`` (facts and decisions with a graph), ``sessions`` (agent turns and summaries), ``memo`` (the memo
tutorial's two tools over memories). Each holds its file format, its record source, its tools, answers and
schemas; no kind imports the engine or the serving layer.
"""
