"""Every record the pipeline stores, one typed and versioned model each (`base.StoredRecord`).

Readers name the class they expect (`ArtifactManifest.read(store, key)`); nobody outside this
package indexes a stored record by string key.
"""

from neuronforge.records.base import RecordError, RecordTooNew, StoredRecord

__all__ = ["RecordError", "RecordTooNew", "StoredRecord"]
