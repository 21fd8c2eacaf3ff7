"""author: the commands an author runs (verify's command line, new_lesson, prose_lint, bench_scale); on top."""
