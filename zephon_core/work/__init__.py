"""What to train on: the work-source and reader contracts, datasets, lanes, chunk sizing and prefetch (no payload I/O).

The static mixture work source, its mixtures, shuffles, exhaustion policies and steering gate are
a default plugin (:mod:`zephon_core.defaults.sources`); their 0.1.0 modules here
(``zephon_core.work.source`` and the others) only forward there.
"""
