"""The farm index: a summary of what a store holds that the store keeps itself, so that every read
costs what it shows (a page of rows, one artifact) rather than what the store holds.

The manifests stay the truth; the index is a cache of them, never a reason to publish or skip a
build (`published.lookup` still follows `index/<key>.json` to a complete manifest). Writers
append small records to a tail with compare-and-swap (`log`); the tail is folded into sorted,
checksummed pages under a head (`snapshot`); readers merge the two (`reader`).
`neuronforge index rebuild` writes it afresh from the manifests; `neuronforge verify --store`
compares it with them, both ways. Whoever finds a published artifact damaged records it (`damage`), so
the index shows it damaged rather than published; the scrub (`neuronforge.farm.scrub`) walks the store in
pages to find what nobody opened.
"""

from neuronforge.artifacts.farm_index.damage import clear_damage, note_damaged, read_damage
from neuronforge.artifacts.farm_index.entry import (
    Entry,
    building_record,
    deleted_record,
    failure_record,
    published_record,
)
from neuronforge.artifacts.farm_index.log import COMPACT_AT, IndexCorrupt
from neuronforge.artifacts.farm_index.notes import announce, append, note_published, record_failure
from neuronforge.artifacts.farm_index.reader import FarmIndex, Window, read_window
from neuronforge.artifacts.farm_index.snapshot import PageRef, check, compact, rebuild, scan

__all__ = [
    "COMPACT_AT",
    "Entry",
    "FarmIndex",
    "IndexCorrupt",
    "PageRef",
    "Window",
    "announce",
    "append",
    "building_record",
    "check",
    "clear_damage",
    "compact",
    "deleted_record",
    "failure_record",
    "note_damaged",
    "note_published",
    "published_record",
    "read_damage",
    "read_window",
    "rebuild",
    "record_failure",
    "scan",
]
