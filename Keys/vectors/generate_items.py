#!/usr/bin/env python3
"""Generates Keys/vectors/items/: the canonical attribute-set text of items.md §4.

An independent encoder written from the specification alone (Python standard library only):
attributes sorted by the UTF-8 bytes of their names, each written as
`<name bytes>:<name><value bytes>:<value>` with decimal byte counts.
"""
import json
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "items")


def encode(attributes):
    out = b""
    for name, value in sorted(((n.encode(), v.encode()) for n, v in attributes.items())):
        out += str(len(name)).encode() + b":" + name + str(len(value)).encode() + b":" + value
    return out


def vector(name, comment, payload, attributes=None, expect="success"):
    lines = [f"expect: {expect}", f"comment: {comment}"]
    if attributes is not None:
        lines.append("attributes-json: " + json.dumps(attributes, sort_keys=True, ensure_ascii=True))
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(("\n".join(lines) + "\n\n").encode() + payload)


def good(name, comment, attributes):
    vector(name, comment, encode(attributes), attributes)


os.makedirs(HERE, exist_ok=True)
good("empty_set", "no attribute at all: the empty text", {})
good("service_account", "the service and account pair of the conveniences", {"service": "mail.example.com", "account": "ann"})
good("sorted_by_bytes", "names sorted by their UTF-8 bytes (Z before a, a before ä)", {"a": "1", "Z": "2", "\u00e4": "3"})
good("empty_value", "an empty value is written 0:", {"xdg:schema": "org.example.Password", "note": ""})
good("separators_inside", "colons and digits inside names and values change nothing", {"1:2": "3:4", "k": "10:x"})
good("multibyte_counts", "counts are bytes, not characters", {"\u540d\u524d": "\U0001F511 key"})
vector("count_too_long", "a count past the end of the text", b"7:service9:abc", expect="integrityFailure")
vector("missing_colon", "a count without its colon", b"7service3:abc", expect="integrityFailure")
vector("repeated_name", "the same name twice", b"1:a1:x1:a1:y", expect="integrityFailure")
vector("name_without_value", "a name with no value after it", b"1:a", expect="integrityFailure")
vector("not_a_digit", "a count that is not decimal", b"x:a1:b", expect="integrityFailure")
