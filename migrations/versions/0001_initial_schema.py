"""Initial schema: sessions, the transcript, temporal view entries, compactions,
replacements, blobs, session memory and import bookkeeping.

Revision ID: 0001
Revises: 
Create Date: 2026-11-30 09:38:07.722169
"""
from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

#: 64-bit integers; plain INTEGER on SQLite (already 64-bit there).
BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('blobs',
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', BigInt, nullable=False),
    sa.Column('compression', sa.String(length=16), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_blobs'))
    )
    op.create_table('sessions',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('title', sa.Text(), nullable=True),
    sa.Column('cwd', sa.Text(), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('context_window', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.Column('parent_id', sa.String(length=36), nullable=True),
    sa.Column('metadata_json', sa.Text(), server_default='{}', nullable=False),
    sa.Column('last_seq', BigInt, server_default='0', nullable=False),
    sa.Column('base_seq', BigInt, server_default='0', nullable=False),
    sa.Column('view_version', sa.Integer(), server_default='0', nullable=False),
    sa.Column('view_tokens', BigInt, server_default='0', nullable=False),
    sa.Column('explicit_count', sa.Integer(), server_default='0', nullable=False),
    sa.Column('tail_state', sa.Text(), server_default='{}', nullable=False),
    sa.Column('compact_failures', sa.Integer(), server_default='0', nullable=False),
    sa.ForeignKeyConstraint(['parent_id'], ['sessions.id'], name=op.f('fk_sessions_parent_id_sessions'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sessions'))
    )
    op.create_index('ix_sessions_updated_at', 'sessions', ['updated_at'], unique=False)
    op.create_table('compactions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('boundary_seq', BigInt, nullable=False),
    sa.Column('summary_seq', BigInt, nullable=True),
    sa.Column('replaced_version', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.Column('pre_tokens', BigInt, nullable=False),
    sa.Column('post_tokens', BigInt, nullable=False),
    sa.Column('messages_summarized', sa.Integer(), nullable=False),
    sa.Column('summarized_seqs_json', sa.Text(), nullable=False),
    sa.Column('head_uuid', sa.String(length=100), nullable=True),
    sa.Column('anchor_uuid', sa.String(length=100), nullable=True),
    sa.Column('tail_uuid', sa.String(length=100), nullable=True),
    sa.Column('custom_instructions', sa.Text(), nullable=True),
    sa.Column('summarizer', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('metadata_json', sa.Text(), server_default='{}', nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_compactions_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compactions'))
    )
    op.create_index('ix_compactions_session_id_boundary_seq', 'compactions', ['session_id', 'boundary_seq'], unique=False)
    op.create_table('imports',
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('source', sa.String(length=32), nullable=False),
    sa.Column('source_key', sa.String(length=500), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('bytes_done', BigInt, nullable=False),
    sa.Column('lines_done', BigInt, nullable=False),
    sa.Column('prefix_sha256', sa.String(length=64), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_imports_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', name=op.f('pk_imports')),
    sa.UniqueConstraint('source', 'source_key', name=op.f('uq_imports_source_source_key'))
    )
    op.create_table('messages',
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('seq', BigInt, nullable=False),
    sa.Column('uuid', sa.String(length=100), nullable=False),
    sa.Column('parent_uuid', sa.String(length=100), nullable=True),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('type', sa.String(length=16), nullable=False),
    sa.Column('subtype', sa.String(length=64), nullable=True),
    sa.Column('timestamp', sa.String(length=40), nullable=True),
    sa.Column('api_message_id', sa.String(length=200), nullable=True),
    sa.Column('usage_json', sa.Text(), nullable=True),
    sa.Column('is_meta', sa.Boolean(), server_default=sa.text('(false)'), nullable=False),
    sa.Column('is_compact_summary', sa.Boolean(), server_default=sa.text('(false)'), nullable=False),
    sa.Column('metadata_json', sa.Text(), nullable=True),
    sa.Column('content_json', sa.Text(), nullable=False),
    sa.Column('tokens', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_messages_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'seq', name=op.f('pk_messages')),
    sa.UniqueConstraint('session_id', 'uuid', name=op.f('uq_messages_session_id_uuid'))
    )
    op.create_table('replacements',
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('tool_use_id', sa.String(length=200), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('replacement', sa.Text(), nullable=False),
    sa.Column('blob_sha256', sa.String(length=64), nullable=True),
    sa.Column('original_size', BigInt, nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['blob_sha256'], ['blobs.sha256'], name=op.f('fk_replacements_blob_sha256_blobs')),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_replacements_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'tool_use_id', name=op.f('pk_replacements'))
    )
    op.create_table('session_memory',
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('notes', sa.Text(), nullable=False),
    sa.Column('covers_seq', BigInt, nullable=False),
    sa.Column('covers_uuid', sa.String(length=100), nullable=True),
    sa.Column('tokens_at_update', BigInt, server_default='0', nullable=False),
    sa.Column('tool_calls_at_update', sa.Integer(), server_default='0', nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_session_memory_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', name=op.f('pk_session_memory'))
    )
    op.create_table('source_lines',
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('line_no', BigInt, nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('entry_type', sa.String(length=64), nullable=True),
    sa.Column('message_seq', BigInt, nullable=True),
    sa.Column('raw', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_source_lines_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'line_no', name=op.f('pk_source_lines'))
    )
    op.create_table('view_entries',
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.Column('valid_from', sa.Integer(), nullable=False),
    sa.Column('key', BigInt, nullable=False),
    sa.Column('seq', BigInt, nullable=False),
    sa.Column('valid_to', sa.Integer(), nullable=True),
    sa.Column('content_json', sa.Text(), nullable=True),
    sa.Column('tokens', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_view_entries_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'valid_from', 'key', name=op.f('pk_view_entries'))
    )
    op.create_index('ix_view_entries_open', 'view_entries', ['session_id', 'key'], unique=False, sqlite_where=sa.text('valid_to IS NULL'), postgresql_where=sa.text('valid_to IS NULL'))
    op.create_index('ix_view_entries_session_id_valid_to', 'view_entries', ['session_id', 'valid_to'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_view_entries_session_id_valid_to', table_name='view_entries')
    op.drop_index('ix_view_entries_open', table_name='view_entries', sqlite_where=sa.text('valid_to IS NULL'), postgresql_where=sa.text('valid_to IS NULL'))
    op.drop_table('view_entries')
    op.drop_table('source_lines')
    op.drop_table('session_memory')
    op.drop_table('replacements')
    op.drop_table('messages')
    op.drop_table('imports')
    op.drop_index('ix_compactions_session_id_boundary_seq', table_name='compactions')
    op.drop_table('compactions')
    op.drop_index('ix_sessions_updated_at', table_name='sessions')
    op.drop_table('sessions')
    op.drop_table('blobs')
