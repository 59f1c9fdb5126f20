"""The schema as SQLAlchemy typed models; Alembic revisions are written from these.

JSON is stored as text we serialize ourselves (same bytes on both engines, and
the hot paths run on the DBAPI connection without an ORM round trip).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Enough for any seq/key; plain INTEGER on SQLite so it stays a 64-bit rowid type.
BigInt = BigInteger().with_variant(Integer(), "sqlite")

#: The single implicit owner of every row on SQLite (PostgreSQL: the role, `current_user`).
LOCAL_OWNER = "local"


def owner_column() -> Mapped[str]:
    """Whose row it is: on PostgreSQL its session's owner (revision 0009 sets the default), on SQLite 'local'."""
    return mapped_column(String(63), nullable=False, server_default=text(f"'{LOCAL_OWNER}'"))


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class SessionRow(Base):
    """A session and the O(1) state of its active view."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    title: Mapped[str | None] = mapped_column(Text)
    cwd: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(200))
    context_window: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)
    parent_id: Mapped[str | None] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="SET NULL"))
    metadata_json: Mapped[str] = mapped_column(Text, nullable=False, server_default="{}")
    #: Highest seq assigned in the transcript (0 when empty).
    last_seq: Mapped[int] = mapped_column(BigInt, nullable=False, server_default="0")
    #: Messages with seq > base_seq belong to the view implicitly (appended since the last rewrite).
    base_seq: Mapped[int] = mapped_column(BigInt, nullable=False, server_default="0")
    view_version: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    view_tokens: Mapped[int] = mapped_column(BigInt, nullable=False, server_default="0")
    #: Open explicit view rows; implicit entries follow them.
    explicit_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    #: Last assistant turn's tool_use ids and which are answered (append validation in O(1)).
    tail_state: Mapped[str] = mapped_column(Text, nullable=False, server_default="{}")
    compact_failures: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    #: Whose session it is (row-level security on PostgreSQL is by this column).
    owner: Mapped[str] = owner_column()
    #: The machine it was captured on (SESSIONSTORE_HOST, else the host name).
    host: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (
        Index("ix_sessions_updated_at", "updated_at"),
        Index("uq_sessions_id_owner", "id", "owner", unique=True),
        Index("ix_sessions_owner_host", "owner", "host"),
    )


class MessageRow(Base):
    """The transcript: one row per recorded message, never updated."""

    __tablename__ = "messages"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInt, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(100), nullable=False)
    parent_uuid: Mapped[str | None] = mapped_column(String(100))
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    type: Mapped[str] = mapped_column(String(16), nullable=False)
    subtype: Mapped[str | None] = mapped_column(String(64))
    timestamp: Mapped[str | None] = mapped_column(String(40))
    api_message_id: Mapped[str | None] = mapped_column(String(200))
    usage_json: Mapped[str | None] = mapped_column(Text)
    is_meta: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    is_compact_summary: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    metadata_json: Mapped[str | None] = mapped_column(Text)
    content_json: Mapped[str] = mapped_column(Text, nullable=False)
    tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    #: Set by an append: the view's running token total, tail state and write time after this
    #: message. When seq > sessions.last_seq these are the session's current figures (the
    #: session row is not written per append); NULL for rows written by rewrites and imports.
    view_tokens: Mapped[int | None] = mapped_column(BigInt)
    tail_state: Mapped[str | None] = mapped_column(Text)
    written_at: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (UniqueConstraint("session_id", "uuid"),)


class ViewEntryRow(Base):
    """A temporal view row: valid from one view version until a rewrite closes it."""

    __tablename__ = "view_entries"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    valid_from: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: Sort key within a view; sparse so a rewrite can insert without renumbering.
    key: Mapped[int] = mapped_column(BigInt, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInt, nullable=False)
    valid_to: Mapped[int | None] = mapped_column(Integer)
    #: Replaced content (cleared or spilled tool results), else NULL = the message's own.
    content_json: Mapped[str | None] = mapped_column(Text)
    tokens: Mapped[int] = mapped_column(Integer, nullable=False)

    __table_args__ = (
        Index(
            "ix_view_entries_open",
            "session_id",
            "key",
            sqlite_where=text("valid_to IS NULL"),
            postgresql_where=text("valid_to IS NULL"),
        ),
        #: Answers the past-view query valid_from <= v AND (valid_to IS NULL OR valid_to > v) in the index
        #: (it replaced an index on (session_id, valid_to) alone, which could not bound valid_from).
        Index("ix_view_entries_version_range", "session_id", "valid_from", "valid_to"),
        Index(
            "ix_view_entries_open_seq",
            "session_id",
            "seq",
            sqlite_where=text("valid_to IS NULL"),
            postgresql_where=text("valid_to IS NULL"),
        ),
    )


class CompactionRow(Base):
    """One row per boundary: what a rewrite replaced and what it kept."""

    __tablename__ = "compactions"

    owner: Mapped[str] = owner_column()

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    boundary_seq: Mapped[int] = mapped_column(BigInt, nullable=False)
    summary_seq: Mapped[int | None] = mapped_column(BigInt)
    replaced_version: Mapped[int] = mapped_column(Integer, nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    trigger: Mapped[str] = mapped_column(String(16), nullable=False)
    pre_tokens: Mapped[int] = mapped_column(BigInt, nullable=False)
    post_tokens: Mapped[int] = mapped_column(BigInt, nullable=False)
    messages_summarized: Mapped[int] = mapped_column(Integer, nullable=False)
    summarized_seqs_json: Mapped[str] = mapped_column(Text, nullable=False)
    head_uuid: Mapped[str | None] = mapped_column(String(100))
    anchor_uuid: Mapped[str | None] = mapped_column(String(100))
    tail_uuid: Mapped[str | None] = mapped_column(String(100))
    custom_instructions: Mapped[str | None] = mapped_column(Text)
    summarizer: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    metadata_json: Mapped[str] = mapped_column(Text, nullable=False, server_default="{}")
    #: The boundary's number in its session, from 1 in boundary order (`history --boundary K`).
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)
    #: Oldest valid_from among the replaced view's rows: a past-view read scans valid_from from here.
    view_floor: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_compactions_session_id_boundary_seq", "session_id", "boundary_seq"),
        UniqueConstraint("session_id", "ordinal"),
    )


class BlobRow(Base):
    """Content-addressed, compressed bytes (spilled tool results)."""

    __tablename__ = "blobs"

    owner: Mapped[str] = owner_column()
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInt, nullable=False)
    compression: Mapped[str] = mapped_column(String(16), nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    #: The role that wrote the row (revision 0019): a share writer's blob is readable through its own spills only.
    writer: Mapped[str] = owner_column()

    #: One copy per owner and digest: a blob is never shared across owners by its hash alone.
    __table_args__ = (PrimaryKeyConstraint("owner", "sha256", name="pk_blobs"),)


class ReplacementRow(Base):
    """A persisted decision to show a tool result differently (cleared, spilled, snipped)."""

    __tablename__ = "replacements"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    tool_use_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    replacement: Mapped[str] = mapped_column(Text, nullable=False)
    blob_sha256: Mapped[str | None] = mapped_column(String(64))
    original_size: Mapped[int | None] = mapped_column(BigInt)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    #: The role that wrote the decision (revision 0019): it makes a blob readable only if that role wrote the blob.
    writer: Mapped[str] = owner_column()

    __table_args__ = (
        ForeignKeyConstraint(
            ["owner", "blob_sha256"], ["blobs.owner", "blobs.sha256"], name="fk_replacements_owner_blobs"
        ),
    )


class SessionMemoryRow(Base):
    """The running session notes and the last message they cover."""

    __tablename__ = "session_memory"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    notes: Mapped[str] = mapped_column(Text, nullable=False)
    covers_seq: Mapped[int] = mapped_column(BigInt, nullable=False)
    covers_uuid: Mapped[str | None] = mapped_column(String(100))
    tokens_at_update: Mapped[int] = mapped_column(BigInt, nullable=False, server_default="0")
    tool_calls_at_update: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class PinRow(Base):
    """A pinned message: carried verbatim through every compaction, within the session's pin budget."""

    __tablename__ = "pins"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInt, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(100), nullable=False)
    #: What the pinned text costs in the view (the pin budget is the sum).
    tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    pinned_at: Mapped[float] = mapped_column(Float, nullable=False)
    #: "caller" (append(pinned=True), pin) or "auto" (the standing-instruction detector).
    source: Mapped[str] = mapped_column(String(16), nullable=False, server_default="caller")


class SourceLineRow(Base):
    """Every line of an imported file, raw, so it can be exported byte-for-byte: a row holds `line_count` lines
    from `line_no` (a block, sessionstore.storage.codecs.linepack), or one line (rows stored before revision 0015)."""

    __tablename__ = "source_lines"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    line_no: Mapped[int] = mapped_column(BigInt, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    entry_type: Mapped[str | None] = mapped_column(String(64))
    message_seq: Mapped[int | None] = mapped_column(BigInt)
    raw: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    line_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")


class ImportRow(Base):
    """Which file a session came from and how much of it is in, for idempotent re-imports."""

    __tablename__ = "imports"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(String(32), nullable=False)
    source_key: Mapped[str] = mapped_column(String(500), nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    bytes_done: Mapped[int] = mapped_column(BigInt, nullable=False)
    lines_done: Mapped[int] = mapped_column(BigInt, nullable=False)
    prefix_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)

    __table_args__ = (
        UniqueConstraint("owner", "source", "source_key"),
        Index("ix_imports_source_key", "source_key"),
        Index("ix_imports_path", "path"),
    )


class ImportFileRow(Base):
    """One file a session's source was read from (the original, a restored or synced copy) and how much of it is in."""

    __tablename__ = "import_files"

    #: Part of the key since revision 0009: each owner reads files of their own (one path, one row per owner).
    owner: Mapped[str] = mapped_column(String(63), primary_key=True, server_default=text(f"'{LOCAL_OWNER}'"))
    source: Mapped[str] = mapped_column(String(32), primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    bytes_done: Mapped[int] = mapped_column(BigInt, nullable=False)
    lines_done: Mapped[int] = mapped_column(BigInt, nullable=False)
    prefix_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)

    __table_args__ = (
        Index("ix_import_files_session_id", "session_id"),
        Index("ix_import_files_path", "path"),
    )


class PipelineStateRow(Base):
    """What the pipeline's layers have looked at in one view version, so a restart need not rescan it."""

    __tablename__ = "pipeline_states"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    view_version: Mapped[int] = mapped_column(Integer, nullable=False)
    #: View entries the state covers (a prefix of that version's view).
    scanned: Mapped[int] = mapped_column(Integer, nullable=False)
    state_json: Mapped[str] = mapped_column(Text, nullable=False)
    saved_at: Mapped[float] = mapped_column(Float, nullable=False)


class SearchMarkRow(Base):
    """How far a session's messages are in the search index (its high-water mark)."""

    __tablename__ = "search_marks"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    indexed_seq: Mapped[int] = mapped_column(BigInt, nullable=False)


class SessionForkRow(Base):
    """A fork's lineage: the session it was forked from and the point of the cut.

    `parent_id` has no foreign key on purpose: the record outlives a deleted parent, so a fork
    still says where it came from (its own copy of the view keeps it whole).
    """

    __tablename__ = "session_forks"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    parent_id: Mapped[str] = mapped_column(String(36), nullable=False)
    #: message (`--at`), boundary (`--before-boundary`) or current (the parent's active view).
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    #: The parent's view version the fork's view was read from.
    view_version: Mapped[int] = mapped_column(Integer, nullable=False)
    #: kind message: the parent message the view was cut right after.
    message_uuid: Mapped[str | None] = mapped_column(String(100))
    message_seq: Mapped[int | None] = mapped_column(BigInt)
    #: kind boundary: the parent's boundary K whose view-before the fork holds.
    boundary_index: Mapped[int | None] = mapped_column(Integer)
    #: How many entries the forked view holds.
    entries: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)

    __table_args__ = (Index("ix_session_forks_parent_id", "parent_id"),)


class TokenCounts:
    """The token kinds (usage_counts.KINDS, in that order) of usage_responses and usage_rollup.

    A mixin, so both tables declare the same columns once; declarative copies them into each table
    after the table's own columns, which is where revision 0008 created them.
    """

    input_tokens: Mapped[int] = mapped_column(BigInt, nullable=False)
    output_tokens: Mapped[int] = mapped_column(BigInt, nullable=False)
    cache_write_5m: Mapped[int] = mapped_column(BigInt, nullable=False)
    cache_write_1h: Mapped[int] = mapped_column(BigInt, nullable=False)
    cache_read: Mapped[int] = mapped_column(BigInt, nullable=False)


class UsageMarkRow(Base):
    """How far a session's messages are counted in the usage tables (their high-water mark)."""

    __tablename__ = "usage_marks"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    counted_seq: Mapped[int] = mapped_column(BigInt, nullable=False)


class UsageStateRow(Base):
    """SQLite: the newest transcript row (rowid, session, seq) when every session was last found counted.

    While that row is still the newest, nothing was appended since, so a report skips the per-session check.
    """

    __tablename__ = "usage_state"

    owner: Mapped[str] = owner_column()

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    last_rowid: Mapped[int] = mapped_column(BigInt, nullable=False)
    session_id: Mapped[str] = mapped_column(String(36), nullable=False)
    seq: Mapped[int] = mapped_column(BigInt, nullable=False)


class UsageResponseRow(TokenCounts, Base):
    """One API response's usage (its streamed pieces folded: the largest count of each kind)."""

    __tablename__ = "usage_responses"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    #: The API message id, or `seq:<n>` for a message with usage but no id.
    response_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    #: Hours since the Unix epoch (UTC) of the response's first piece.
    hour: Mapped[int] = mapped_column(BigInt, nullable=False)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    #: How many of the prompt-size thresholds (sessionstore.storage.usage.PROMPT_BANDS) the prompt exceeded.
    band: Mapped[int] = mapped_column(Integer, nullable=False)
    #: The response across sessions (revision 0018, usage_counts.identity_of): its API id, or a per-line
    #: id or `uuid:<message uuid>` with its first piece's timestamp; the copies a fork or a resume made share it.
    identity: Mapped[str] = mapped_column(String(250), nullable=False, server_default="")
    #: True for the one row of an identity summed in usage_rollup; the other copies wait uncounted.
    counted: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))

    __table_args__ = (Index("ix_usage_responses_identity", "identity"),)


class UsageRollupRow(TokenCounts, Base):
    """Usage summed per session, hour, model and prompt band: what every usage report reads."""

    __tablename__ = "usage_rollup"

    owner: Mapped[str] = owner_column()

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    hour: Mapped[int] = mapped_column(BigInt, primary_key=True)
    model: Mapped[str] = mapped_column(String(200), primary_key=True)
    band: Mapped[int] = mapped_column(Integer, primary_key=True)
    responses: Mapped[int] = mapped_column(BigInt, nullable=False)

    __table_args__ = (Index("ix_usage_rollup_hour", "hour"),)


class SessionShareRow(Base):
    """A session its owner shares with another role, read-only or not (row-level security reads it)."""

    __tablename__ = "session_shares"

    session_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    grantee: Mapped[str] = mapped_column(String(63), primary_key=True)
    owner: Mapped[str] = owner_column()
    read_only: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    created_at: Mapped[float] = mapped_column(Float, nullable=False)

    __table_args__ = (
        ForeignKeyConstraint(
            ["session_id", "owner"],
            ["sessions.id", "sessions.owner"],
            name="fk_session_shares_session_id_sessions",
            ondelete="CASCADE",
        ),
        Index("ix_session_shares_grantee", "grantee"),
    )


class AgentSdkKeyRow(Base):
    """A Claude Agent SDK session key (sessionstore.integrations.agent_sdk): its write time, summary and session."""

    __tablename__ = "agent_sdk_keys"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True, autoincrement=True)
    #: The role that appended (PostgreSQL: `current_user`, set by revision 0020's default; row-level security).
    owner: Mapped[str] = owner_column()
    project_key: Mapped[str] = mapped_column(Text, nullable=False)
    sdk_session_id: Mapped[str] = mapped_column(Text, nullable=False)
    #: '' for the main transcript, else the SDK's subpath (e.g. subagents/agent-1).
    subpath: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    #: Storage write time of the key's last append, epoch milliseconds (the summary's mtime too).
    mtime_ms: Mapped[int] = mapped_column(BigInt, nullable=False)
    entry_count: Mapped[int] = mapped_column(BigInt, nullable=False, server_default=text("0"))
    #: The SDK's fold_session_summary output, kept verbatim (main keys only).
    summary_json: Mapped[str | None] = mapped_column(Text)
    #: The session the key's Claude Code lines became (NULL while none did).
    linked_session: Mapped[str | None] = mapped_column(String(36))
    #: Why its lines stopped becoming a session (a copy of a session imported otherwise...); its entries are kept.
    import_note: Mapped[str | None] = mapped_column(Text)
    #: How many of its entries are in the session (or kept as entries only); the rest are pending (revision 0022).
    imported_count: Mapped[int] = mapped_column(BigInt, nullable=False, server_default=text("0"))

    __table_args__ = (
        UniqueConstraint("owner", "project_key", "sdk_session_id", "subpath", name="uq_agent_sdk_keys_owner_key"),
        Index("ix_agent_sdk_keys_linked_session", "linked_session"),
        Index(
            "ix_agent_sdk_keys_pending",
            "owner",
            postgresql_where=text("imported_count < entry_count"),
            sqlite_where=text("imported_count < entry_count"),
        ),
    )


class AgentSdkEntryRow(Base):
    """One entry an SDK key holds, in append order, as the JSON text of its transcript line."""

    __tablename__ = "agent_sdk_entries"

    key_id: Mapped[int] = mapped_column(
        BigInt,
        ForeignKey("agent_sdk_keys.id", ondelete="CASCADE", name="fk_agent_sdk_entries_key_id"),
        primary_key=True,
    )
    n: Mapped[int] = mapped_column(BigInt, primary_key=True)
    owner: Mapped[str] = owner_column()
    #: The entry's uuid when it has one: unique per key (a retried batch adds nothing).
    uuid: Mapped[str | None] = mapped_column(Text)
    entry: Mapped[str] = mapped_column(Text, nullable=False)

    __table_args__ = (Index("uq_agent_sdk_entries_uuid", "key_id", "uuid", unique=True),)


#: The search index's engine-specific tables (SQLite FTS5 and its shadow tables, PostgreSQL's
#: tsvector table): written by revision 0002 in raw DDL (SQLite's reworked by 0014 and 0017, with the view
#: `search_text`; its texts' dictionaries by 0018), so they have no model here.
SEARCH_INDEX_TABLES = ("search_rows", "search_texts", "search_fts", "search_docs", "search_dictionaries")
#: SQLite-only tables written in raw DDL: the packed message texts' dictionaries (revision 0013).
SQLITE_ONLY_TABLES = ("text_dictionaries",)


def include_name(name: str | None, type_: str, _parents: object = None) -> bool:
    """Alembic's autogenerate filter: leave out the engine-specific tables (search index, text dictionaries)."""
    return not (type_ == "table" and name is not None and name.startswith(SEARCH_INDEX_TABLES + SQLITE_ONLY_TABLES))


class ImportLockRow(Base):
    """An import's lock on a file name (PostgreSQL: taken FOR UPDATE, so one person's imports of it run one at a time).

    One row per owner, source and file name (a synced copy keeps the name); row-level security (revision 0023)
    gives each role its own rows only, so nobody takes or waits on another's lock. Never locked on SQLite.
    """

    __tablename__ = "import_locks"

    #: The role that imports (PostgreSQL: `current_user`, set by revision 0023's default).
    owner: Mapped[str] = mapped_column(String(63), primary_key=True, server_default=text(f"'{LOCAL_OWNER}'"))
    source: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
