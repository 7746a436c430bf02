# Factory Floor — the two commands users type are `make demo` and `make test`.
# Everything they need is installed from here, on a fresh Debian 12 machine, as root.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PY          := $(VENV)/bin/python
BIN         := $(abspath $(VENV))/bin
COLL_ROOT   := build/collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/factory_floor/llm
SANITY_ROOT := build/sanity/ansible_collections/factory_floor/llm
export PATH := $(BIN):$(PATH)
export CONTAINERS_CONF := $(abspath lab/containers.conf)
export ANSIBLE_COLLECTIONS_PATH := $(abspath $(COLL_ROOT))
export ANSIBLE_CONFIG := $(abspath ansible.cfg)
export LAB_PIP := $(BIN)/pip

APT_PACKAGES := podman runc debootstrap netavark aardvark-dns iptables nftables curl git python3-venv openssh-client

.PHONY: help deps apt doctor lab-doctor venv collection promtool nginx lab-image lab-network lab-up lab-down demo test test-quick units lint sanity molecule build clean

help:
	@echo "make demo        build the lab, deploy the split topology, switch to replicas, print the report"
	@echo "make test        units, ansible-lint, ansible-test sanity and the molecule scenarios"
	@echo "make test-quick  units, lint and sanity only"
	@echo "make lab-up / lab-down   start / remove the lab hosts (spark-a, spark-b, gateway)"
	@echo "make doctor      check this machine has what the lab and the tests need (installs nothing)"

# The stamp names the list's hash: a machine that installed an older list installs
# again when a package is added.
APT_STAMP := .cache/apt.$(shell printf '%s' "$(APT_PACKAGES)" | sha256sum | cut -c1-12).done
apt: $(APT_STAMP)
$(APT_STAMP):
	@mkdir -p .cache
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES)
	@touch $@

venv: $(VENV)/.done
$(VENV)/.done: requirements.txt | $(APT_STAMP)
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt
	@touch $@

collection: $(COLL_LINK)
$(COLL_LINK):
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(abspath .) $(COLL_LINK)

deps: apt venv collection

# The doctor names what is missing, with its fix, and fails: `doctor` alone never
# installs anything; `lab-doctor` runs it once `make apt` has, so building or
# booting the lab (lab-image, and lab-up, demo, molecule through it) stops there
# (serial make runs it before deps' virtualenv).
DOCTOR := APT_PACKAGES="$(APT_PACKAGES)" bash lab/doctor.sh
doctor:
	@$(DOCTOR)

lab-doctor: apt
	@$(DOCTOR)

lab-image: lab-doctor deps
	bash lab/build-image.sh

# The lab network with the subnet of the lab hosts' fixed addresses, and the GB10 hosts'
# direct link (lab/link.sh connects them once they exist).
lab-network: lab-doctor
	bash lab/network.sh

# molecule remembers it created the lab hosts even when they are gone (removed by another
# checkout's run, or by hand): then it is told to forget them first.
LAB_HOSTS := spark-a spark-b gateway
lab-up: lab-image lab-network
	@if [ "$$(podman ps --format '{{.Names}}' | grep -cxE '$(subst $(eval) ,|,$(LAB_HOSTS))')" != 3 ]; then \
	  molecule destroy -s default >/dev/null && bash lab/network.sh; fi
	molecule create -s default
	bash lab/link.sh

lab-down: deps
	molecule destroy -s default

demo: lab-up
	ansible-playbook -i inventory/lab playbooks/demo.yml

# promtool, Prometheus' own rule checker, for the alert rules' tests
# (tests/unit/extras/test_prometheus_alerts.py). Taken out of Debian's prometheus package
# without installing it: installed, that package is 96 MB with its JavaScript libraries, adds
# a system user and starts a Prometheus server on :9090 on this machine. Only its promtool
# binary (48 MB, libc only) is kept under .cache; the .deb (19 MB) is removed.
PROMTOOL := .cache/promtool/usr/bin/promtool
promtool: $(PROMTOOL)
$(PROMTOOL): | $(APT_STAMP)
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
$(NGINX_ROOT)/usr/sbin/nginx: | $(APT_STAMP)
	rm -rf .cache/nginx && mkdir -p $(NGINX_ROOT)
	cd .cache/nginx && apt-get download -qq -o APT::Sandbox::User=root $(NGINX_DEBS) && \
	  for deb in *.deb; do dpkg-deb -x "$$deb" root; done && rm -f *.deb
	LD_LIBRARY_PATH=$(NGINX_ROOT)/usr/lib/x86_64-linux-gnu:$(NGINX_ROOT)/lib/x86_64-linux-gnu $@ -v

units: venv collection $(PROMTOOL) $(NGINX_ROOT)/usr/sbin/nginx
	PROMTOOL=$(abspath $(PROMTOOL)) FF_NGINX_ROOT=$(abspath $(NGINX_ROOT)) $(PY) -m pytest -q --import-mode=importlib tests/unit

lint: venv collection
	ansible-lint --profile production

# ansible-test runs each sanity test in a virtualenv it bootstraps with get-pip.py
# from a host these machines cannot reach; tests/sanity/get-pip.py is a stand-in
# placed where ansible-test caches that download (private HOME under build/).
# It tests what ships: the collection without the build_ignore'd lab/CI files.
SANITY_VENV := .venv-sanity
SANITY_HOME := $(abspath build/ansible-test-home)
ANSIBLE_TEST_REQS := $(VENV)/lib/python3*/site-packages/ansible_test/_data/requirements
$(SANITY_VENV)/.done: requirements.txt | $(APT_STAMP)
	python3 -m venv $(SANITY_VENV)
	$(SANITY_VENV)/bin/pip install -q "$$(grep '^ansible-core==' requirements.txt)"
	@touch $@

sanity: venv $(SANITY_VENV)/.done
	rm -rf build/sanity && mkdir -p $(SANITY_ROOT) $(SANITY_HOME)/.ansible/test/cache
	cp tests/sanity/get-pip.py $(SANITY_HOME)/.ansible/test/cache/get_pip_24_2.py
	git ls-files -co --exclude-standard | grep -vE '^(build|lab|\.ci|benchmarks|extensions)/' | tar -cf - -T - | tar -xf - -C $(SANITY_ROOT)
	cd $(SANITY_ROOT) && git init -q && git add -A && HOME=$(SANITY_HOME) PATH=$(abspath $(SANITY_VENV))/bin:$$PATH ansible-test sanity --local --python 3.11 --color no

# `make test` runs the scenarios proven green on this machine (MOLECULE_SCENARIOS);
# every other scenario directory is excluded. `make molecule MOLECULE_SCENARIOS=all`
# runs them all.
MOLECULE_ALL := $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard extensions/molecule/*/molecule.yml))))
MOLECULE_SCENARIOS ?= default metrics proxy replica switch
MOLECULE_EXCLUDE = $(if $(filter all,$(MOLECULE_SCENARIOS)),,$(filter-out $(MOLECULE_SCENARIOS),$(MOLECULE_ALL)))
# A run starts from new lab hosts: ones left running by an interrupted run (or another
# checkout) may be mid-deploy, and molecule would reuse them. Its destroy also removes
# the lab network, so that is made again after it.
molecule: lab-image lab-network
	molecule destroy -s default >/dev/null
	bash lab/network.sh
	molecule test --all $(foreach s,$(MOLECULE_EXCLUDE),--exclude $(s))

test-quick: units lint sanity

test: test-quick molecule

build: venv
	mkdir -p build && ansible-galaxy collection build --force --output-path build .

clean:
	rm -rf build .cache
