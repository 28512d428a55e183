"""Every statement the driver sends, in one place to audit.

The driver runs no SQL of its own beyond these CALLs to the protocol's stored procedures (see
docs/protocol.md), the reads of documented tables used by ``mysqlq stats``, and the writes into
its session's own intake table (a TEMPORARY table that ``queue_intake_open`` creates). Parameters
are passed to mysqlclient as %s placeholders (the intake's rows are escaped by the connection, see
``mysqlq.intake``); nothing else is formatted into the text.
"""

from __future__ import annotations

# protocol version the driver speaks; the database's queue_version must match
PROTOCOL_VERSION = "1.13"

# a procedure, not a function: creating a stored function needs SUPER where binary logging is on
# (MySQL's default and every managed MySQL's); protocol 1.1 and older had a function
VERSION = "CALL queue_version()"
VERSION_BEFORE_1_2 = "SELECT queue_version()"

# producer
PUBLISH = "CALL queue_publish(%s, %s, %s, %s, %s, %s)"
# queue_publish with kind, content type and priority (the driver's publish: it always sends a
# content type)
PUBLISH_MESSAGE = "CALL queue_publish_message(%s, %s, %s, %s, %s, %s, %s, %s, %s)"
# queue_publish_message with the partition_id an earlier publish of the topic and key returned: the
# client's autocommit publish (in the procedure's own transaction the hint saves a lookup)
PUBLISH_HINTED = "CALL queue_publish_hinted(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
PUBLISH_BATCH = "CALL queue_publish_batch(%s, %s)"
# the fast batch path (publish_batch, the Spark writer): the session's TEMPORARY intake table,
# opened once per connection; its rows, sent as multi-row INSERTs; one CALL publishes them all
INTAKE_OPEN = "CALL queue_intake_open()"
# (the columns a chunk's rows set, then their values: see mysqlq.intake.insert_statements)
INTAKE_INSERT = b"INSERT INTO queue__intake (%s) VALUES "
# an intake row's columns (mysqlq.intake.insert_statements writes each message's row in this order)
INTAKE_COLUMNS = (
    b"idx",
    b"msg_key",
    b"msg_id",
    b"payload",
    b"metadata",
    b"delay_ms",
    b"kind",
    b"content_type",
    b"priority",
    b"part_rank",
)
# rows a caller's rolled-back transaction may have left (the CALL empties it otherwise)
INTAKE_CLEAR = "DELETE FROM queue__intake"
PUBLISH_INTAKE = "CALL queue_publish_intake(%s)"
# a session setting the publish procedures read: refuse topics that were never configured
STRICT_TOPICS = "SET @mysqlq_strict_topics = 1"
TOPIC_CONFIGURE = "CALL queue_topic_configure(%s, %s, %s, %s, %s)"
# a topic's archive: on (1) or off (0), and how long archived rows are kept (NULL: unchanged)
TOPIC_ARCHIVE = "CALL queue_topic_archive(%s, %s, %s)"
# a topic's dedup window in ms (0: none, ids unique while stored)
TOPIC_DEDUP = "CALL queue_topic_dedup(%s, %s)"

# group membership and leases
SUBSCRIBE = "CALL queue_subscribe(%s, %s, %s, %s, %s, %s, NULL)"
UNSUBSCRIBE = "CALL queue_unsubscribe(%s, %s)"
# the admin's: a group's settings (max attempts, DLQ topic), a DLQ topic's mark, access rules
GROUP_CONFIGURE = "CALL queue_group_configure(%s, %s, %s, %s, %s, %s, %s)"
# flow control (admin and operator): pause or resume a group on a topic, or (NULL) the topic
PAUSE = "CALL queue_pause(%s, %s)"
RESUME = "CALL queue_resume(%s, %s)"
TOPIC_DLQ = "CALL queue_topic_dlq(%s, %s)"
ACL_GRANT = "CALL queue_acl_grant(%s, %s, %s)"
ACL_REVOKE = "CALL queue_acl_revoke(%s, %s, %s)"
HEARTBEAT = "CALL queue_heartbeat(%s, %s, %s, %s, NULL)"
ACQUIRE_LEASES = "CALL queue_acquire_leases(%s, %s, %s, %s, NULL)"
RELEASE_LEASES = "CALL queue_release_leases(%s, %s, %s, NULL)"
DEREGISTER = "CALL queue_deregister(%s, %s, %s, NULL)"

# cancel a message not yet delivered (topic, key, id, group: NULL for every group)
CANCEL = "CALL queue_cancel(%s, %s, %s, %s)"

# recurring messages (the admin's; pause, resume, delete and run now the operator's too):
# name, topic, key, payload, kind, content type, every ms, cron, missed policy
SCHEDULE = "CALL queue_schedule(%s, %s, %s, %s, %s, %s, %s, %s, %s, NULL)"
UNSCHEDULE = "CALL queue_schedule_delete(%s)"
PAUSE_SCHEDULE = "CALL queue_schedule_pause(%s, NULL)"
RESUME_SCHEDULE = "CALL queue_schedule_resume(%s, NULL)"
RUN_SCHEDULE = "CALL queue_schedule_run(%s, NULL)"
# the schedules, for client.schedules(), `mysqlq schedule list` and the dashboard (a reader's
# SELECT on queue_schedules; the payload's size, not the payload)
SCHEDULES = """
SELECT s.name, s.topic, s.partition_key, LENGTH(s.payload) AS payload_bytes, s.kind,
       s.content_type, s.every_ms, s.cron, s.missed, s.paused, s.next_slot_at, s.last_slot_at,
       s.last_published_at, s.last_message_id, s.published, s.runs_now, s.last_error,
       s.created_at, s.updated_at
FROM queue_schedules s
ORDER BY s.name
"""

# consuming
FETCH = "CALL queue_fetch(%s, %s, %s, %s, %s, %s, NULL)"
FETCH_WAIT = "CALL queue_fetch_wait(%s, %s, %s, %s, %s, %s, %s, %s, %s, NULL)"
ACK = "CALL queue_ack(%s, %s, NULL)"
NACK = "CALL queue_nack(%s, %s, %s, %s, NULL)"
EXTEND = "CALL queue_extend(%s, %s, %s, NULL)"
DEAD_LETTER = "CALL queue_dead_letter(%s, %s, %s, NULL)"
RELEASE_MESSAGES = "CALL queue_release_messages(%s, %s, NULL)"
# settling inside the handler's own transaction (never committing it): exactly-once effects
ACK_TX = "CALL queue_ack_tx(%s, %s, NULL)"
NACK_TX = "CALL queue_nack_tx(%s, %s, %s, %s, NULL)"
DEAD_LETTER_TX = "CALL queue_dead_letter_tx(%s, %s, %s, NULL)"
READ_COMMITTED_SESSION = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
START_TRANSACTION = "START TRANSACTION"

# administration
SEEK = "CALL queue_seek(%s, %s, %s, %s, NULL)"
REDRIVE = "CALL queue_redrive(%s, %s, NULL)"
REDRIVE_ONE = "CALL queue_redrive_one(%s, %s, %s, NULL)"
GC = "CALL queue_gc(%s, NULL)"
# a topic's archived messages archived at or before a time (NULL: all), at most a limit
ARCHIVE_PURGE = "CALL queue_archive_purge(%s, %s, %s)"
MAINTENANCE = "CALL queue_maintenance(NULL)"
# one caller per interval runs queue_maintenance: every subscriber ticks it (runner, interval ms)
MAINTENANCE_TICK = "CALL queue_maintenance_tick(%s, %s, NULL)"

# reads of documented tables, for metrics, `mysqlq stats` and `mysqlq dlq`. A group's lag is
# called `unacked` here: LAG is a reserved word since MySQL 8.0 (scripts/check_reserved_words.py)
LAG = """
SELECT p.partition_id, p.last_offset - COALESCE(o.offset_acked, 0) AS unacked
FROM queue_partitions p
LEFT JOIN queue_offsets o ON o.group_name = %s AND o.partition_id = p.partition_id
WHERE p.partition_id IN (
    SELECT j.pid FROM JSON_TABLE(%s, '$[*]' COLUMNS (pid BIGINT PATH '$')) AS j
)
"""

STATS_GROUPS = """
SELECT s.topic, s.group_name,
       COUNT(p.partition_id) AS partitions,
       COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) AS unacked,
       COALESCE(SUM(CASE WHEN o.cursor_until > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
                         THEN o.cursor_pending ELSE 0 END), 0)
         + (SELECT COUNT(*) FROM queue_delivery_state ds
             JOIN queue_partitions dp ON dp.partition_id = ds.partition_id
            WHERE ds.group_name = s.group_name AND dp.topic = s.topic AND ds.state = 1
              AND ds.invisible_until > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) AS in_flight,
       (SELECT COUNT(*) FROM queue_subscriber_heartbeats h
         WHERE h.group_name = s.group_name AND h.topic = s.topic
           AND h.expires_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) AS live_subscribers,
       (SELECT COUNT(*) FROM queue_messages d
         WHERE d.topic = s.dlq_topic AND d.origin_group = s.group_name) AS dlq_depth,
       COALESCE(SUM(o.cancelled), 0) AS cancelled,
       MAX(s.paused) AS paused,
       (SELECT MAX(t.paused) FROM queue_topics t WHERE t.topic = s.topic) AS topic_paused,
       MAX(s.rate_per_s) AS rate, MAX(s.burst) AS burst, MAX(s.concurrency) AS concurrency
FROM queue_subscriptions s
LEFT JOIN queue_partitions p ON p.topic = s.topic
LEFT JOIN queue_offsets o ON o.group_name = s.group_name AND o.partition_id = p.partition_id
GROUP BY s.topic, s.group_name, s.dlq_topic
ORDER BY s.topic, s.group_name
"""

# each group's lag by kind and priority: the messages past its watermark, read from the log
# (a range read of each partition's primary key, so it costs what the backlog holds)
STATS_BACKLOG = """
SELECT s.topic, s.group_name, m.kind, m.priority, COUNT(*) AS messages
FROM queue_subscriptions s
JOIN queue_partitions p ON p.topic = s.topic
LEFT JOIN queue_offsets o ON o.group_name = s.group_name AND o.partition_id = p.partition_id
JOIN queue_messages m
  ON m.partition_id = p.partition_id AND m.msg_offset > COALESCE(o.offset_acked, 0)
WHERE %s IS NULL OR s.topic = %s
GROUP BY s.topic, s.group_name, m.kind, m.priority
ORDER BY s.topic, s.group_name, m.priority DESC, m.kind
"""

# one group's lag on one topic: what is published but not yet acked (cheap: no DLQ count)
GROUP_LAG = """
SELECT COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) AS unacked
FROM queue_partitions p
LEFT JOIN queue_offsets o ON o.group_name = %s AND o.partition_id = p.partition_id
WHERE p.topic = %s
"""

DLQ_LIST = """
SELECT partition_id, msg_offset AS `offset`, partition_key, message_id AS id, origin_topic,
       origin_group, origin_offset, origin_message_id, failures, last_error, failed_at, kind,
       content_type, priority
FROM queue_messages
WHERE topic = %s
ORDER BY failed_at, partition_id, msg_offset
LIMIT %s
"""

DLQ_SHOW = """
SELECT partition_id, msg_offset AS `offset`, partition_key, message_id AS id, payload, metadata,
       origin_topic, origin_group, origin_offset, origin_message_id, failures, last_error,
       failed_at, published_at, kind, content_type, priority
FROM queue_messages
WHERE topic = %s AND partition_id = %s AND msg_offset = %s
"""

# the archive of a topic (queue_archive, filled by GC where the topic says so): newest first and
# without payloads (`mysqlq archive list`), then the row(s) of one message id with its payload
ARCHIVE_LIST = """
SELECT partition_id, msg_offset AS `offset`, partition_key, message_id AS id, kind, content_type,
       priority, published_at, archived_at, target_group, origin_topic, origin_group,
       origin_offset, failures
FROM queue_archive
WHERE topic = %s
ORDER BY archived_at DESC, partition_id DESC, msg_offset DESC
LIMIT %s
"""

ARCHIVE_SHOW = """
SELECT partition_id, msg_offset AS `offset`, partition_key, message_id AS id, kind, content_type,
       priority, metadata, published_at, deliver_at, archived_at, target_group, origin_topic,
       origin_group, origin_offset, origin_message_id, failures, last_error, failed_at, payload
FROM queue_archive
WHERE topic = %s AND message_id = %s
ORDER BY archived_at, partition_id, msg_offset
"""

# Spark data source (mysqlq.spark): plain reads of the log, and the offsets commit of a Spark
# consumer group. Optional conditions take NULL for "no bound", so the text never changes.
COMMIT_OFFSETS = "CALL queue_commit_offsets(%s, %s, %s, NULL)"

SPARK_PARTITIONS = """
SELECT p.partition_id, IF(p.slot < 0, p.partition_key, NULL) AS partition_key, p.slot,
       p.last_offset
FROM queue_partitions p
WHERE p.topic = %s
ORDER BY p.partition_id
"""

# the group's committed position on each partition of a topic
SPARK_GROUP_OFFSETS = """
SELECT o.partition_id, o.offset_acked
FROM queue_offsets o
JOIN queue_partitions p ON p.partition_id = o.partition_id
WHERE o.group_name = %s AND p.topic = %s
"""

# subscriber leases of a group that are live: a Spark group must not have any
SPARK_LIVE_LEASES = """
SELECT COUNT(*) AS leases
FROM queue_partition_leases l
WHERE l.group_name = %s AND l.topic = %s AND l.leased_by IS NOT NULL
  AND l.expires_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
"""

# per partition, the first message in (lo, hi] not yet due (deliver_at in the future, G12);
# the argument is a JSON array of [partition_id, lo, hi]
SPARK_FIRST_UNDUE = """
SELECT m.partition_id, MIN(m.msg_offset) AS first_undue
FROM JSON_TABLE(%s, '$[*]' COLUMNS (
        pid BIGINT PATH '$[0]', lo BIGINT PATH '$[1]', hi BIGINT PATH '$[2]')) AS r
JOIN queue_messages m
  ON m.partition_id = r.pid AND m.msg_offset > r.lo AND m.msg_offset <= r.hi
WHERE m.deliver_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
GROUP BY m.partition_id
"""

# one chunk of a partition's range (lo, hi] in offset order, of the log or the archive ({table}:
# queue_messages or queue_archive, which has the log's columns); the {columns} are chosen from
# mysqlq.spark.columns (a fixed list of column names), never from user input.
# Arguments: partition_id, lo, hi, min published_at, max published_at (exclusive), group (NULL:
# every row; else rows without a target group or addressed to it), message id, limit.
SPARK_READ_RANGE = """
SELECT m.msg_offset, {columns}
FROM {table} m
WHERE m.partition_id = %s AND m.msg_offset > %s AND m.msg_offset <= %s
  AND (%s IS NULL OR m.published_at >= %s)
  AND (%s IS NULL OR m.published_at < %s)
  AND (%s IS NULL OR m.target_group IS NULL OR m.target_group = %s)
  AND (%s IS NULL OR m.message_id = %s)
ORDER BY m.msg_offset
LIMIT %s
"""

# the archive's counterpart (option source=archive): per partition of the topic, the lowest and
# highest archived offset (NULL when nothing is archived); SPARK_READ_RANGE reads its ranges
SPARK_ARCHIVE_PARTITIONS = """
SELECT p.partition_id, IF(p.slot < 0, p.partition_key, NULL) AS partition_key, p.slot,
       (SELECT MIN(a.msg_offset) FROM queue_archive a
         WHERE a.partition_id = p.partition_id) AS first_offset,
       (SELECT MAX(a.msg_offset) FROM queue_archive a
         WHERE a.partition_id = p.partition_id) AS last_offset
FROM queue_partitions p
WHERE p.topic = %s
ORDER BY p.partition_id
"""

# Parquet archive (`mysqlq spark archive`): per partition of the subscribed topics, the offset
# every subscribed group has passed (a subscribed group that never touched the partition counts
# as 0, as in queue_gc) and the oldest offset still in the log
SPARK_SAFE_OFFSETS = """
SELECT p.topic, p.partition_id, MIN(COALESCE(o.offset_acked, 0)) AS safe_offset,
       (SELECT MIN(m.msg_offset) FROM queue_messages m
         WHERE m.partition_id = p.partition_id) AS first_offset
FROM queue_partitions p
JOIN queue_subscriptions s ON s.topic = p.topic
LEFT JOIN queue_offsets o ON o.group_name = s.group_name AND o.partition_id = p.partition_id
GROUP BY p.topic, p.partition_id
ORDER BY p.topic, p.partition_id
"""

# DLQ report: the topics that hold dead letters (some group's DLQ topic, or <topic><suffix>)
SPARK_DLQ_TOPICS = """
SELECT t.topic
FROM queue_topics t
WHERE t.topic IN (SELECT s.dlq_topic FROM queue_subscriptions s)
   OR EXISTS (SELECT 1 FROM queue_topics o WHERE t.topic = CONCAT(o.topic, o.dlq_suffix))
ORDER BY t.topic
"""

# mysqlq doctor: what it reads of the server (any account may read these), and its one fix
DOCTOR_SERVER = (
    "SELECT @@global.read_only AS read_only, @@global.event_scheduler AS event_scheduler,"
    " @@global.log_bin AS log_bin, @@version AS version, DATABASE() AS db"
)
DOCTOR_SUPER_READ_ONLY = "SELECT @@global.super_read_only AS super_read_only"  # MySQL only
DOCTOR_BINLOG_FORMAT = "SELECT @@global.binlog_format AS binlog_format"
DOCTOR_GROUP_MEMBERS = """
SELECT MEMBER_HOST AS host, MEMBER_PORT AS port, MEMBER_STATE AS state, MEMBER_ROLE AS role,
    MEMBER_ID = @@server_uuid AS self
FROM performance_schema.replication_group_members
WHERE MEMBER_ID <> ''
ORDER BY MEMBER_HOST, MEMBER_PORT
"""
DOCTOR_GROUP_MODE = (
    "SELECT @@global.group_replication_single_primary_mode AS single_primary,"
    " @@global.group_replication_consistency AS consistency"
)
DOCTOR_EVENT = """
SELECT STATUS AS status FROM information_schema.EVENTS
WHERE EVENT_SCHEMA = DATABASE() AND EVENT_NAME = 'queue_maintenance_event'
"""
DOCTOR_MAINTENANCE = """
SELECT last_run_at, next_run_at, last_run_by,
    CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS now_ms
FROM queue_maintenance_schedule WHERE job = 'maintenance'
"""
# the admin's test clock (queue_settings): a caller's p_now is honoured where it is on
DOCTOR_TEST_CLOCK = "SELECT value FROM queue_settings WHERE setting = 'test_clock' AND value = 'on'"
DOCTOR_GRANTS = "SHOW GRANTS FOR CURRENT_USER()"
DOCTOR_ENABLE_EVENT = "ALTER EVENT queue_maintenance_event ENABLE"
# probes that fail where the server lacks the variable or table (the doctor reads the failure)
SERVER_SPECIFIC = ("DOCTOR_SUPER_READ_ONLY", "DOCTOR_GROUP_MEMBERS", "DOCTOR_GROUP_MODE")
