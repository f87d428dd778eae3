# One entry point. The README's two commands are `make demo` and `make test`.
.PHONY: setup demo test test-fast bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/lakehouse demo

test: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider tests -m "not bench"

test-fast: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider tests -m "not spark and not broker and not registry and not airflow and not bench"

bench: setup
	.venv/bin/python bench/decode.py
	.venv/bin/python bench/land.py
	.venv/bin/python bench/merge.py
	.venv/bin/python bench/tables.py
	.venv/bin/python bench/warm.py

clean:
	rm -rf .lakehouse
