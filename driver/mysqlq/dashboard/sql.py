"""The dashboard's reads: plain SELECTs of the documented tables (docs/protocol.md), nothing else.

The dashboard writes only through the driver's admin calls (``Client.redrive``,
``Client.seek``), and only when it was started with ``--allow-actions``; every statement here
is a read that the ``reader`` account of ``mysqlq grants`` may run (SELECT on the ``queue_*``
tables). Parameters are %s placeholders; nothing is formatted into the text. Every "now" is
the database clock, read once per page (``NOW_MS``) and passed in, so one page agrees with
itself. Names that are reserved words on MySQL 8+ (``lag``, ``rows``, ...) are not used as
aliases (scripts/check_reserved_words.py).
"""

from __future__ import annotations

NOW_MS = "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS now_ms"

# per topic: partitions, what was ever published (the sum of the partitions' sequences), what
# the log keeps (offsets are gap-free and GC deletes from the front of a partition, so the kept
# offset range counts the kept messages) and the oldest kept message (the first row of each
# partition: a primary key lookup, no scan of the log)
TOPICS = """
SELECT t.topic, t.partitions AS slots, t.max_attempts, t.dlq_suffix, t.retention_ms,
       t.created_at, MAX(t.paused) AS paused,
       COUNT(f.partition_id) AS partition_count,
       COALESCE(SUM(f.last_offset), 0) AS published,
       COALESCE(SUM(CASE WHEN f.first_offset IS NULL THEN 0
                         ELSE f.last_offset - f.first_offset + 1 END), 0) AS kept,
       MIN(m.published_at) AS oldest_at
FROM queue_topics t
LEFT JOIN (
    SELECT p.topic, p.partition_id, p.last_offset,
           (SELECT MIN(x.msg_offset) FROM queue_messages x
             WHERE x.partition_id = p.partition_id) AS first_offset
    FROM queue_partitions p
) AS f ON f.topic = t.topic
LEFT JOIN queue_messages m ON m.partition_id = f.partition_id AND m.msg_offset = f.first_offset
GROUP BY t.topic, t.partitions, t.max_attempts, t.dlq_suffix, t.retention_ms, t.created_at
ORDER BY t.topic
"""

# per subscription (topic, group): its flow control (paused, or its topic; rate limit as a
# float, burst, concurrency cap), partitions, lag (`unacked`: published and not yet acked or
# dead-lettered, as `mysqlq stats` counts it), the sum of the watermarks (its rise over time is
# the group's throughput) and the cursor batches in flight, and the messages cancelled for it
# (queue_cancel; the watermark passes them too). Argument: now.
GROUPS = """
SELECT s.topic, s.group_name, s.dlq_topic, s.max_attempts, s.created_at,
       MAX(s.paused) AS paused, MAX(s.rate_per_s) + 0E0 AS rate, MAX(s.burst) AS burst,
       MAX(s.concurrency) AS concurrency,
       (SELECT MAX(t.paused) FROM queue_topics t WHERE t.topic = s.topic) AS topic_paused,
       COUNT(p.partition_id) AS partition_count,
       COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) AS unacked,
       COALESCE(SUM(o.offset_acked), 0) AS acked_total,
       COALESCE(SUM(CASE WHEN o.cursor_until > %s THEN o.cursor_pending ELSE 0 END), 0)
         AS cursor_in_flight,
       COALESCE(SUM(o.cancelled), 0) AS cancelled
FROM queue_subscriptions s
LEFT JOIN queue_partitions p ON p.topic = s.topic
LEFT JOIN queue_offsets o ON o.group_name = s.group_name AND o.partition_id = p.partition_id
GROUP BY s.topic, s.group_name, s.dlq_topic, s.max_attempts, s.created_at
ORDER BY s.topic, s.group_name
"""

# redelivered or extended messages in flight, per group and topic. Argument: now.
ROWS_IN_FLIGHT = """
SELECT ds.group_name, dp.topic, COUNT(*) AS in_flight
FROM queue_delivery_state ds
JOIN queue_partitions dp ON dp.partition_id = ds.partition_id
WHERE ds.state = 1 AND ds.invisible_until > %s
GROUP BY ds.group_name, dp.topic
"""

# live subscribers per group and topic (fair share counts these). Argument: now.
LIVE_SUBSCRIBERS = """
SELECT h.group_name, h.topic, COUNT(*) AS live
FROM queue_subscriber_heartbeats h
WHERE h.expires_at > %s
GROUP BY h.group_name, h.topic
"""

# every subscriber that has a heartbeat row (live or not yet cleaned up) and how many partitions
# it holds now. Arguments: now, limit.
SUBSCRIBERS = """
SELECT h.group_name, h.topic, h.subscriber, h.started_at, h.heartbeat_at, h.expires_at,
       (SELECT COUNT(*) FROM queue_partition_leases l
         WHERE l.group_name = h.group_name AND l.topic = h.topic
           AND l.leased_by = h.subscriber AND l.expires_at > %s) AS held
FROM queue_subscriber_heartbeats h
ORDER BY h.topic, h.group_name, h.subscriber
LIMIT %s
"""

# DLQ entries per DLQ topic and origin: all of them, and those not yet redriven (queue_redrive
# keeps its place per DLQ partition in queue_offsets under the group name '#redrive';
# queue_redrive_one marks an entry past it with a queue_delivery_state row of that group). A DLQ
# topic is some subscription's dlq_topic, or <topic><dlq_suffix>.
DLQ_SUMMARY = """
SELECT p.topic AS dlq_topic, m.origin_topic, m.origin_group,
       COUNT(*) AS entries,
       COALESCE(SUM(CASE WHEN m.msg_offset > COALESCE(r.offset_acked, 0) AND d.msg_offset IS NULL
                    THEN 1 ELSE 0 END), 0)
         AS pending,
       MAX(m.failed_at) AS last_failed_at
FROM queue_partitions p
JOIN queue_messages m ON m.partition_id = p.partition_id
LEFT JOIN queue_offsets r ON r.group_name = '#redrive' AND r.partition_id = p.partition_id
LEFT JOIN queue_delivery_state d
  ON d.group_name = '#redrive' AND d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
WHERE m.origin_topic IS NOT NULL
  AND (p.topic IN (SELECT s.dlq_topic FROM queue_subscriptions s)
       OR p.topic IN (SELECT CONCAT(t.topic, t.dlq_suffix) FROM queue_topics t))
GROUP BY p.topic, m.origin_topic, m.origin_group
ORDER BY p.topic, m.origin_topic, m.origin_group
"""

TOPIC_EXISTS = "SELECT t.topic FROM queue_topics t WHERE t.topic = %s"

SUBSCRIPTION = """
SELECT s.topic, s.group_name, s.dlq_topic, s.max_attempts, s.created_at
FROM queue_subscriptions s
WHERE s.topic = %s AND s.group_name = %s
"""

# one group's partitions of a topic, the most behind first: position, lag, and the lease (holder,
# epoch, since when). Arguments: group, group, topic, limit.
GROUP_PARTITIONS = """
SELECT p.partition_id, p.slot, p.partition_key, p.last_offset,
       COALESCE(o.offset_acked, 0) AS acked,
       p.last_offset - COALESCE(o.offset_acked, 0) AS unacked,
       o.cursor_pending, o.cursor_until, o.updated_at,
       l.leased_by, l.lease_epoch, l.leased_at, l.renewed_at, l.expires_at
FROM queue_partitions p
LEFT JOIN queue_offsets o ON o.group_name = %s AND o.partition_id = p.partition_id
LEFT JOIN queue_partition_leases l ON l.group_name = %s AND l.partition_id = p.partition_id
WHERE p.topic = %s
ORDER BY unacked DESC, p.partition_id
LIMIT %s
"""

# one DLQ topic's entries, newest failure first, each marked redriven or not. Arguments: DLQ
# topic, origin group (NULL: all), origin group, limit.
DLQ_ENTRIES = """
SELECT m.partition_id, m.msg_offset AS `offset`, m.partition_key, m.message_id AS id,
       m.origin_topic, m.origin_group, m.origin_offset, m.origin_message_id, m.failures,
       m.last_error, m.failed_at, m.published_at, LENGTH(m.payload) AS payload_bytes,
       CASE WHEN m.msg_offset <= COALESCE(r.offset_acked, 0) OR d.msg_offset IS NOT NULL
            THEN 1 ELSE 0 END AS redriven
FROM queue_partitions p
JOIN queue_messages m ON m.partition_id = p.partition_id
LEFT JOIN queue_offsets r ON r.group_name = '#redrive' AND r.partition_id = p.partition_id
LEFT JOIN queue_delivery_state d
  ON d.group_name = '#redrive' AND d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
WHERE p.topic = %s AND m.origin_topic IS NOT NULL
  AND (%s IS NULL OR m.origin_group = %s)
ORDER BY m.failed_at DESC, m.partition_id DESC, m.msg_offset DESC
LIMIT %s
"""

# one DLQ entry with its payload. Arguments: DLQ topic, partition, offset.
DLQ_ENTRY = """
SELECT m.partition_id, m.msg_offset AS `offset`, m.partition_key, m.message_id AS id,
       m.payload, m.metadata, m.origin_topic, m.origin_group, m.origin_offset,
       m.origin_message_id, m.failures, m.last_error, m.failed_at, m.published_at,
       CASE WHEN m.msg_offset <= COALESCE(r.offset_acked, 0) OR d.msg_offset IS NOT NULL
            THEN 1 ELSE 0 END AS redriven
FROM queue_partitions p
JOIN queue_messages m ON m.partition_id = p.partition_id
LEFT JOIN queue_offsets r ON r.group_name = '#redrive' AND r.partition_id = p.partition_id
LEFT JOIN queue_delivery_state d
  ON d.group_name = '#redrive' AND d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
WHERE p.topic = %s AND m.partition_id = %s AND m.msg_offset = %s
"""

# the entries queue_redrive would send first, in its order (partition, then offset), up to and
# including (partition, offset): what `queue_redrive(dlq, n)` sends for n = their count.
# Arguments: DLQ topic, partition, partition, offset, limit.
DLQ_REDRIVE_AHEAD = """
SELECT m.partition_id, m.msg_offset AS `offset`, m.origin_topic, m.origin_group
FROM queue_partitions p
JOIN queue_messages m ON m.partition_id = p.partition_id
LEFT JOIN queue_offsets r ON r.group_name = '#redrive' AND r.partition_id = p.partition_id
LEFT JOIN queue_delivery_state d
  ON d.group_name = '#redrive' AND d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
WHERE p.topic = %s AND m.origin_topic IS NOT NULL
  AND m.msg_offset > COALESCE(r.offset_acked, 0) AND d.msg_offset IS NULL
  AND (m.partition_id < %s OR (m.partition_id = %s AND m.msg_offset <= %s))
ORDER BY m.partition_id, m.msg_offset
LIMIT %s
"""

# how many entries of a DLQ topic are not yet redriven. Argument: DLQ topic.
DLQ_PENDING = """
SELECT COUNT(*) AS pending
FROM queue_partitions p
JOIN queue_messages m ON m.partition_id = p.partition_id
LEFT JOIN queue_offsets r ON r.group_name = '#redrive' AND r.partition_id = p.partition_id
LEFT JOIN queue_delivery_state d
  ON d.group_name = '#redrive' AND d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
WHERE p.topic = %s AND m.origin_topic IS NOT NULL
  AND m.msg_offset > COALESCE(r.offset_acked, 0) AND d.msg_offset IS NULL
"""
