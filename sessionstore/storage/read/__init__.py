"""The read path: history by compaction boundary, recall, paging, one message's place in the view.

Reads never write: nothing here imports the write path.
"""
