# The two commands of the README. Both set everything up first (scripts/setup.sh is
# idempotent and fast when nothing changed).
.PHONY: setup run test quick

setup:
	./scripts/setup.sh

run: setup
	.venv/bin/relbench run tasks.yaml

quick: setup
	.venv/bin/relbench run tasks/quick.yaml

test: setup
	.venv/bin/python -m pytest -q
