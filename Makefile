# One entry point. The README's two commands are `make demo` and `make test`.
.PHONY: setup demo test test-fast bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/lakehouse demo

# Test files run in TEST_WORKERS processes (pytest-xdist), a whole file to one worker (its module fixtures start
# once); each worker starts its own Spark session and servers. The tests wait on JVMs and subprocesses for about a
# quarter of their time: two workers on 2 cores take 17 min instead of 27. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2

test: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider tests -m "not bench" -n $(TEST_WORKERS) --dist loadfile

test-fast: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider tests -m "not spark and not broker and not registry and not airflow and not bench" -n $(TEST_WORKERS) --dist loadfile

bench: setup
	.venv/bin/python bench/decode.py
	.venv/bin/python bench/land.py
	.venv/bin/python bench/merge.py
	.venv/bin/python bench/tables.py
	.venv/bin/python bench/warm.py

clean:
	rm -rf .lakehouse
