#!/usr/bin/python3
"""Lab only: split inference on the head over loopback, and what it moved on each interface.

Reads /sys/class/net/<iface>/statistics/{rx,tx}_bytes of the link and the LAN interface,
sends --requests completions one after the other to the engine on 127.0.0.1 (so none of
the requests' own bytes cross either interface), reads the counters again and prints
JSON: the bytes each interface moved meanwhile, the seconds, the tokens generated.
The API key comes from the environment (LAB_API_KEY), never from the command line.

  split_traffic.py --link eth1 --lan eth0 --requests 8 --max-tokens 64
"""
import argparse
import json
import os
import time
import urllib.request


def counters(iface):
    base = "/sys/class/net/%s/statistics/" % iface
    with open(base + "rx_bytes") as rx, open(base + "tx_bytes") as tx:
        return int(rx.read()), int(tx.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--link", required=True)
    parser.add_argument("--lan", required=True)
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1/completions")
    parser.add_argument("--model", default="lab-chat")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ.get("LAB_API_KEY", "")}
    before = {iface: counters(iface) for iface in (args.link, args.lan)}
    started = time.monotonic()
    tokens = 0
    for number in range(args.requests):
        body = json.dumps({"model": args.model, "prompt": "hello world %d" % number, "max_tokens": args.max_tokens,
                           "temperature": 0, "ignore_eos": True}).encode()
        request = urllib.request.Request(args.url, data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=300) as answer:
            tokens += json.load(answer).get("usage", {}).get("completion_tokens", 0)
    seconds = time.monotonic() - started
    after = {iface: counters(iface) for iface in (args.link, args.lan)}
    moved = {iface: {"rx": after[iface][0] - before[iface][0], "tx": after[iface][1] - before[iface][1]}
             for iface in before}
    for iface in moved:
        moved[iface]["total"] = moved[iface]["rx"] + moved[iface]["tx"]
    print(json.dumps({"link": moved[args.link], "lan": moved[args.lan], "seconds": round(seconds, 2),
                      "tokens": tokens, "link_interface": args.link, "lan_interface": args.lan}))


if __name__ == "__main__":
    main()
