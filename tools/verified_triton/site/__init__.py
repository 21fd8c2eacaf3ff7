"""site: pages, notebooks and archives built from the lessons and their evidence; imports judge and core."""
