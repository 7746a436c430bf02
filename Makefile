# Factory Floor — the two commands users type are `make demo` and `make test`.
# Everything they need is installed from here, on a fresh Debian 12 machine, as root.
# `make venv` alone installs only what a controller needs (requirements.txt), from PyPI, and nothing from apt:
# the lab's and the tests' tools come with the targets that use them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PY          := $(VENV)/bin/python
BIN         := $(abspath $(VENV))/bin
COLL_ROOT   := build/collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/factory_floor/llm
# ansible-test's copy of the collection, one per Python (3.11 and the newest run side by side in make test).
SANITY_ROOT = build/sanity-$(1)/ansible_collections/factory_floor/llm
export PATH := $(BIN):$(PATH)
export CONTAINERS_CONF := $(abspath lab/containers.conf)
export ANSIBLE_COLLECTIONS_PATH := $(abspath $(COLL_ROOT))
export ANSIBLE_CONFIG := $(abspath ansible.cfg)
export LAB_PIP := $(BIN)/pip

# Everything the lab and the tests take from Debian (lab/doctor.sh checks each, lab/prove-apt.sh proves the list
# on a bare Debian 12). The tests alone (units, lint, sanity, docs) need only TEST_APT_PACKAGES of it: git for
# make sanity, python3-venv for the virtualenvs.
APT_PACKAGES := podman runc debootstrap netavark aardvark-dns iptables nftables curl git python3-venv openssh-client
TEST_APT_PACKAGES := git python3-venv
$(if $(filter-out $(APT_PACKAGES),$(TEST_APT_PACKAGES)),$(error TEST_APT_PACKAGES must be part of APT_PACKAGES))

.PHONY: help deps test-deps lab-deps apt apt-test doctor lab-doctor venv venv-test venv-lab collection promtool nginx lab-image lab-network lab-engines lab-up lab-down demo test test-quick units lint sanity docs units-newest sanity-newest newest molecule build changelog clean

help:
	@echo "make demo        build the lab, deploy the split topology, switch to replicas, print the report"
	@echo "make test        units, ansible-lint, ansible-test sanity, the docs' and changelog's lint, the molecule scenarios"
	@echo "make test-quick  the same without the molecule scenarios (no lab)"
	@echo "make lab-up / lab-down   start / remove the lab hosts (spark-a, spark-b, gateway; LAB_ENGINES=3 adds spark-c)"
	@echo "make doctor      check this machine has what the lab and the tests need (installs nothing)"
	@echo "make venv        a virtualenv with the controller's requirements only (requirements.txt; no apt, no lab)"
	@echo "make build       the collection's tarball under build/ (needs only make venv)"

# The stamp names the list's hash: a machine that installed an older list installs
# again when a package is added. The tests' stamp is satisfied by the whole list's.
APT_STAMP := .cache/apt.$(shell printf '%s' "$(APT_PACKAGES)" | sha256sum | cut -c1-12).done
TEST_APT_STAMP := .cache/apt-test.$(shell printf '%s' "$(TEST_APT_PACKAGES)" | sha256sum | cut -c1-12).done
apt: $(APT_STAMP)
$(APT_STAMP):
	@mkdir -p .cache
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES)
	@touch $@
apt-test: $(TEST_APT_STAMP)
$(TEST_APT_STAMP):
	@mkdir -p .cache
	if [ ! -e $(APT_STAMP) ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEST_APT_PACKAGES); fi
	@touch $@

# The controller's virtualenv: requirements.txt only. The tests' and the lab's tools go into the same
# virtualenv, each list with its own stamp, only when a target that uses them runs.
venv: $(VENV)/.done
$(VENV)/.done: requirements.txt
	@python3 -c 'import venv, ensurepip' 2>/dev/null || { echo "make venv: python3 cannot make a virtualenv (no ensurepip): on Debian or Ubuntu, apt-get install python3-venv" >&2; exit 1; }
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt
	@touch $@
venv-test: $(VENV)/.test.done
$(VENV)/.test.done: requirements.txt requirements-test.txt $(VENV)/.done
	$(VENV)/bin/pip install -q -r requirements.txt -r requirements-test.txt
	@touch $@
venv-lab: $(VENV)/.lab.done
$(VENV)/.lab.done: requirements.txt requirements-lab.txt $(VENV)/.done
	$(VENV)/bin/pip install -q -r requirements.txt -r requirements-lab.txt
	@touch $@

collection: $(COLL_LINK)
$(COLL_LINK):
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(abspath .) $(COLL_LINK)

# Serial make builds these left to right: apt's packages (python3-venv among them) before the virtualenv.
test-deps: apt-test venv venv-test collection
lab-deps: apt venv venv-lab collection
deps: test-deps lab-deps

# The doctor names what is missing, with its fix, and fails: `doctor` alone never
# installs anything; `lab-doctor` runs it once `make apt` has, so building or
# booting the lab (lab-image, and lab-up, demo, molecule through it) stops there
# (serial make runs it before lab-deps' virtualenv).
DOCTOR := APT_PACKAGES="$(APT_PACKAGES)" LAB_ENGINES=$(LAB_ENGINES) bash lab/doctor.sh
doctor:
	@$(DOCTOR)

lab-doctor: apt
	@$(DOCTOR)

# A rebuild leaves the image it replaced untagged (4.8 GiB each; three of them failed the
# doctor's disk check in CI): only untagged images with the build's label go, one a
# container still runs on stays. Here, not in build-image.sh, whose text keys the image.
lab-image: lab-doctor lab-deps
	bash lab/build-image.sh
	podman image prune -f --filter label=factory-floor.inputs >/dev/null

# The lab network with the subnet of the lab hosts' fixed addresses, and the GB10 hosts'
# direct link (lab/link.sh connects them once they exist).
lab-network: lab-doctor
	bash lab/network.sh

# The lab's engine hosts: 2 (spark-a, spark-b: what make test and make demo run) or 3, spark-c too
# (make lab-up LAB_ENGINES=3: inventory/lab-groups and the groups scenario). spark-c is spark-b's
# platform renamed, at the next address, on a core of its own where the machine has one
# (lab/engines.py writes it into a second molecule base config, read after config.yml).
LAB_ENGINES ?= 2
$(if $(filter-out 2 3,$(LAB_ENGINES)),$(error LAB_ENGINES is 2 (spark-a, spark-b) or 3 (spark-c too), not '$(LAB_ENGINES)'))
LAB_ENGINES_CONFIG := build/lab/molecule-engines-3.yml
# molecule over the lab of LAB_ENGINES engine hosts (with 2, molecule as it always ran: config.yml
# only); MOLECULE_ANY_LAB over every lab host there may be, for a destroy, which removes the
# platforms it is given: spark-c too, whatever LAB_ENGINES says.
MOLECULE_LAB := molecule$(if $(filter 3,$(LAB_ENGINES)), -c extensions/molecule/config.yml -c $(LAB_ENGINES_CONFIG))
MOLECULE_ANY_LAB := molecule -c extensions/molecule/config.yml -c $(LAB_ENGINES_CONFIG)
LAB_ALL_HOSTS := spark-a spark-b spark-c gateway
LAB_HOSTS := spark-a spark-b $(if $(filter 3,$(LAB_ENGINES)),spark-c) gateway

# Written on every run: spark-c's core follows this machine's CPUs.
lab-engines: lab-deps
	@mkdir -p $(dir $(LAB_ENGINES_CONFIG))
	$(PY) lab/engines.py 3 > $(LAB_ENGINES_CONFIG).new && mv $(LAB_ENGINES_CONFIG).new $(LAB_ENGINES_CONFIG)

# molecule remembers it created the lab hosts even when they are gone (removed by another
# checkout's run, or by hand), and creates nothing while it does: unless the lab hosts that run
# are exactly LAB_HOSTS (spark-c added or left over too), it is told to forget them first.
lab-up: lab-image lab-network lab-engines
	@if [ "$$(podman ps --format '{{.Names}}' | grep -xE '$(subst $(eval) ,|,$(LAB_ALL_HOSTS))' | LC_ALL=C sort | xargs)" != "$(sort $(LAB_HOSTS))" ]; then \
	  $(MOLECULE_ANY_LAB) destroy -s default >/dev/null && bash lab/network.sh; fi
	$(MOLECULE_LAB) create -s default
	LAB_ENGINES=$(LAB_ENGINES) bash lab/link.sh

lab-down: lab-deps lab-engines
	$(MOLECULE_ANY_LAB) destroy -s default

demo: lab-up
	ansible-playbook -i inventory/lab lab/demo.yml

# promtool, Prometheus' own rule checker, for the alert rules' tests
# (tests/unit/extras/test_prometheus_alerts.py). Taken out of Debian's prometheus package
# without installing it: installed, that package is 96 MB with its JavaScript libraries, adds
# a system user and starts a Prometheus server on :9090 on this machine. Only its promtool
# binary (48 MB, libc only) is kept under .cache; the .deb (19 MB) is removed.
PROMTOOL := .cache/promtool/usr/bin/promtool
promtool: $(PROMTOOL)
$(PROMTOOL): | $(TEST_APT_STAMP)
	rm -rf .cache/promtool && mkdir -p .cache/promtool
	cd .cache/promtool && apt-get download -qq -o APT::Sandbox::User=root prometheus && \
	  dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool && rm -f prometheus_*.deb
	$(PROMTOOL) --version | head -n 1

# nginx with its Lua module for the proxy's tests (tests/unit/roles/test_nginx_proxy_nginx.py),
# taken out of Debian's packages without installing them: installed, the nginx package starts a
# service on this machine, and its stop reaches other nginx masters here by name (the lab's).
# The binary, modules and Lua libraries stay under .cache/nginx/root; the tests run it on
# loopback under their own prefix and stop it by its PID.
NGINX_DEBS := nginx nginx-common libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core lua-resty-lrucache \
              libluajit2-5.1-2 lua-cjson libpcre3
NGINX_ROOT := .cache/nginx/root
nginx: $(NGINX_ROOT)/usr/sbin/nginx
$(NGINX_ROOT)/usr/sbin/nginx: | $(TEST_APT_STAMP)
	rm -rf .cache/nginx && mkdir -p $(NGINX_ROOT)
	cd .cache/nginx && apt-get download -qq -o APT::Sandbox::User=root $(NGINX_DEBS) && \
	  for deb in *.deb; do dpkg-deb -x "$$deb" root; done && rm -f *.deb
	LD_LIBRARY_PATH=$(NGINX_ROOT)/usr/lib/x86_64-linux-gnu:$(NGINX_ROOT)/lib/x86_64-linux-gnu $@ -v

units: test-deps $(PROMTOOL) $(NGINX_ROOT)/usr/sbin/nginx
	PROMTOOL=$(abspath $(PROMTOOL)) FF_NGINX_ROOT=$(abspath $(NGINX_ROOT)) $(PY) -m pytest -q -p no:cacheprovider --import-mode=importlib tests/unit

# ansible-lint's syntax check resolves the playbooks' hosts against an inventory: the example's, as a site's.
# A private HOME: ansible-lint also looks in ~/.ansible/collections, where molecule installs the collection
# it tests, and there it would find an older copy of this one first and lint that.
lint: test-deps
	mkdir -p build/lint-home
	HOME=$(abspath build/lint-home) ANSIBLE_INVENTORY=$(abspath inventory/example) ansible-lint --profile production

# ansible-test runs each sanity test in a virtualenv it bootstraps with get-pip.py
# from a host these machines cannot reach; tests/sanity/get-pip.py is a stand-in
# placed where ansible-test caches that download (private HOME under build/), under
# the name of the pip version that ansible-test asks for.
# It tests what ships: the collection without the build_ignore'd lab/CI files.
# $(call sanity_run,VENV,PYTHON VERSION)
SANITY_VENV := .venv-sanity
# ansible-test's HOME (its virtualenvs and cache), one per Python as the copy.
SANITY_HOME = $(abspath build/ansible-test-home-$(1))
define sanity_run
rm -rf build/sanity-$(2) && mkdir -p $(call SANITY_ROOT,$(2)) $(call SANITY_HOME,$(2))/.ansible/test/cache
pip=$$(sed -n "s/^ *pip='\([0-9.]*\)',.*/\1/p" $(1)/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -n 1); \
  cp tests/sanity/get-pip.py $(call SANITY_HOME,$(2))/.ansible/test/cache/get_pip_$${pip//./_}.py
git ls-files -co --exclude-standard | grep -vE '^(build|lab|\.ci|benchmarks|extensions)/' | tar -cf - -T - | tar -xf - -C $(call SANITY_ROOT,$(2))
cd $(call SANITY_ROOT,$(2)) && git init -q && git add -A && HOME=$(call SANITY_HOME,$(2)) PATH=$(abspath $(1))/bin:$$PATH ansible-test sanity --local --python $(2) --color no
endef
$(SANITY_VENV)/.done: requirements.txt | $(TEST_APT_STAMP)
	python3 -m venv $(SANITY_VENV)
	$(SANITY_VENV)/bin/pip install -q "$$(grep '^ansible-core==' requirements.txt)"
	@touch $@

sanity: test-deps $(SANITY_VENV)/.done
	$(call sanity_run,$(SANITY_VENV),3.11)

# The newest ansible-core (requirements-newest.txt: what pip installs on DGX OS's Python 3.12) runs the units
# and sanity too. It needs Python >= 3.12, which Debian 12 does not have: the first of python3.12, 3.13, 3.14
# on PATH, or under pyenv's versions, that runs and can make a virtualenv. Without one, `make newest` says so
# and passes (NEWEST_PYTHON=/path/to/python3.12 names one).
NEWEST_PYTHON ?= $(shell for p in python3.12 python3.13 python3.14 \
  $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.1[2-4]*/bin/python3 2>/dev/null | sort -V); do \
  "$$p" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
NEWEST_PYVER = $(shell $(NEWEST_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
NEWEST_VENV := .venv-newest
SANITY_NEWEST_VENV := .venv-sanity-newest
# requirements.txt with the newest ansible-core in place of its own.
NEWEST_REQS = <(grep -v '^ansible-core==' requirements.txt; grep '^ansible-core==' requirements-newest.txt)
$(NEWEST_VENV)/.done: requirements.txt requirements-test.txt requirements-newest.txt | $(TEST_APT_STAMP)
	$(NEWEST_PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/pip install -q -r $(NEWEST_REQS) -r requirements-test.txt
	@touch $@
$(SANITY_NEWEST_VENV)/.done: requirements-newest.txt | $(TEST_APT_STAMP)
	$(NEWEST_PYTHON) -m venv $(SANITY_NEWEST_VENV)
	$(SANITY_NEWEST_VENV)/bin/pip install -q "$$(grep '^ansible-core==' requirements-newest.txt)"
	@touch $@

ifeq ($(strip $(NEWEST_PYTHON)),)
units-newest sanity-newest:
	@echo "make $@: skipped: no Python >= 3.12 here (tried python3.12, python3.13, python3.14 and pyenv's versions), which $$(grep '^ansible-core==' requirements-newest.txt) needs; NEWEST_PYTHON=PATH names one"
else
units-newest: test-deps $(NEWEST_VENV)/.done $(PROMTOOL) $(NGINX_ROOT)/usr/sbin/nginx
	@$(NEWEST_VENV)/bin/python -c "import ansible.release; print('ansible-core', ansible.release.__version__)"
	PROMTOOL=$(abspath $(PROMTOOL)) FF_NGINX_ROOT=$(abspath $(NGINX_ROOT)) $(NEWEST_VENV)/bin/python -m pytest -q -p no:cacheprovider --import-mode=importlib tests/unit

sanity-newest: test-deps $(SANITY_NEWEST_VENV)/.done
	$(call sanity_run,$(SANITY_NEWEST_VENV),$(NEWEST_PYVER))
endif
newest: units-newest sanity-newest

# The collection's own documentation, as Galaxy and docs.ansible.com render it: every plugin's and role's
# docs (antsibull-docs), and the changelog fragments (antsibull-changelog).
docs: test-deps
	antsibull-docs lint-collection-docs --plugin-docs .
	antsibull-changelog lint

# `make test` runs the scenarios that fit CI's 70 minutes beside the units, lint and sanity
# (MOLECULE_SCENARIOS: the switch, the main job - measured on CI's machine, 2 cores: the units
# 2 x 19.5 min, default 11, metrics 10, proxy 14, replica 11 and switch 26.5 min); every other
# scenario directory is excluded. `make molecule MOLECULE_SCENARIOS="default metrics proxy replica"`
# runs the others of the former make test (docs/testing.md); `MOLECULE_SCENARIOS=all` runs them all,
# but those that need three engine hosts (MOLECULE_NEEDS_3) only with LAB_ENGINES=3:
# `make molecule MOLECULE_SCENARIOS=groups LAB_ENGINES=3`.
MOLECULE_ALL := $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard extensions/molecule/*/molecule.yml))))
MOLECULE_SCENARIOS ?= switch
MOLECULE_NEEDS_3 := groups
MOLECULE_RUN = $(if $(filter all,$(MOLECULE_SCENARIOS)),$(if $(filter 3,$(LAB_ENGINES)),$(MOLECULE_ALL),$(filter-out $(MOLECULE_NEEDS_3),$(MOLECULE_ALL))),$(MOLECULE_SCENARIOS))
MOLECULE_EXCLUDE = $(filter-out $(MOLECULE_RUN),$(MOLECULE_ALL))
ifneq ($(filter molecule test,$(MAKECMDGOALS)),)
$(if $(and $(filter 2,$(LAB_ENGINES)),$(filter $(MOLECULE_NEEDS_3),$(MOLECULE_SCENARIOS))),$(error scenario $(filter $(MOLECULE_NEEDS_3),$(MOLECULE_SCENARIOS)) needs three engine hosts: add LAB_ENGINES=3))
endif
# A run starts from new lab hosts: ones left running by an interrupted run (or another
# checkout) may be mid-deploy, and molecule would reuse them. Its destroy also removes
# the lab network, so that is made again after it. The lab hosts are the default scenario's
# (shared state); without it in the run, its create first (each scenario imports its prepare).
molecule: lab-image lab-network lab-engines
	$(MOLECULE_ANY_LAB) destroy -s default >/dev/null
	bash lab/network.sh
	$(if $(filter default,$(MOLECULE_RUN)),,$(MOLECULE_LAB) create -s default)
	$(MOLECULE_LAB) test --all $(foreach s,$(MOLECULE_EXCLUDE),--exclude $(s))

# The tests that need no lab, two at a time: each is one process that mostly runs on one core (the units spend most
# of their time waiting for the ansible-playbook they started), and the CI machine has two: measured there, the units
# 19.5 min on each ansible-core alone. Their dependencies first, serially, in this make (apt's python3-venv before any
# virtualenv); then a make -j2 of the runs only, each one's output printed whole when it ends (-O). None writes where
# another reads: the units keep no cache, each sanity run its own copy (SANITY_ROOT), lint its own HOME.
NEWEST_DEPS = $(if $(strip $(NEWEST_PYTHON)),$(NEWEST_VENV)/.done $(SANITY_NEWEST_VENV)/.done)
test-quick: test-deps $(PROMTOOL) $(NGINX_ROOT)/usr/sbin/nginx $(SANITY_VENV)/.done $(NEWEST_DEPS)
	$(MAKE) --no-print-directory -j2 -O units units-newest sanity sanity-newest lint docs


test: test-quick molecule

build: venv
	mkdir -p build && ansible-galaxy collection build --force --output-path build .

# A release: the fragments become changelogs/changelog.yaml and CHANGELOG.rst under galaxy.yml's version.
changelog: test-deps
	antsibull-changelog release

clean:
	rm -rf build .cache
