-- The ids a topic with a dedup window has seen (queue_topic_dedup): per partition and id, the
-- offset of the id's first copy within the window and when the window ends. No payloads: this is
-- all dedup needs once GC removed the copy. Written by publish (queue__dedup_append, under the
-- partition's sequence row lock), purged by GC (queue__purge_dedup_ids) once expired.
-- Publish: a point write or read by the primary key
--     INSERT ... VALUES (partition_id, message_id, ...)       (a new id: the whole cost)
--     SELECT ... WHERE partition_id = ? AND message_id = ? FOR UPDATE   (an id seen before)
CREATE TABLE IF NOT EXISTS queue_dedup_ids (
    partition_id BIGINT NOT NULL,
    message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- the first copy's offset within the window: what a duplicate publish answers
    msg_offset BIGINT NOT NULL,
    -- the first copy's published_at plus the window it was published under (epoch ms): from then
    -- on the id is free again, and GC may purge the row
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (partition_id, message_id),
    -- GC: DELETE FROM queue_dedup_ids WHERE expires_at <= ? ORDER BY expires_at LIMIT 1000
    KEY queue_dedup_ids_by_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
