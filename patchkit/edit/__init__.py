"""The edit loop: a series as a git work tree (``edit``), and the verbs that change it and write the
series back (``absorb``, ``refresh``, ``new``, ``drop``, ``move``), each proven and crash-safe."""
