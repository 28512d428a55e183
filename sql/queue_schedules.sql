-- Recurring messages: one row per schedule (queue_schedule creates or replaces it). The maintenance
-- tick publishes each slot once, as message id 'schedule:<name>:<slot_at>', in the transaction that
-- moves next_slot_at on (queue__schedules_run); run-now publishes 'schedule:<name>:run-<runs_now>'.
CREATE TABLE IF NOT EXISTS queue_schedules (
    name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- NULL: unkeyed (spread over the topic's partitions by the hash of the message id)
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    payload LONGBLOB NOT NULL,
    kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- exactly one of every_ms (slots at the epoch multiples of every_ms) and cron (5 fields, UTC)
    every_ms BIGINT NULL,
    cron VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- the cron expression parsed by queue__cron_parse: bit n set = value n allowed (minutes 0-59,
    -- hours 0-23, days of the month 1-31, months 1-12, days of the week 0-6 with 0 = Sunday);
    -- cron_day_or = 1 when both day fields are restricted: a day matches either (as cron does)
    cron_minutes BIGINT UNSIGNED NULL,
    cron_hours INT UNSIGNED NULL,
    cron_days INT UNSIGNED NULL,
    cron_months INT UNSIGNED NULL,
    cron_weekdays INT UNSIGNED NULL,
    cron_day_or TINYINT NULL,
    -- what a runner does with slots more than a minute late: 'last' publishes the latest of them
    -- (when no later slot is due), 'skip' publishes none
    missed VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT 'last',
    paused TINYINT NOT NULL DEFAULT 0,
    -- the next slot to publish (epoch ms); moved on in the transaction that publishes it
    next_slot_at BIGINT NOT NULL,
    last_slot_at BIGINT NULL,
    last_published_at BIGINT NULL,
    last_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- messages published by the runner (one per slot) and by run-now
    published BIGINT NOT NULL DEFAULT 0,
    runs_now BIGINT NOT NULL DEFAULT 0,
    -- the last error a runner met publishing this schedule (cleared by the next success)
    last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (name),
    -- the runner's query, on every maintenance tick: the due schedules, earliest first
    --   SELECT ... FROM queue_schedules WHERE paused = 0 AND next_slot_at <= now
    --   ORDER BY next_slot_at, name LIMIT 1 FOR UPDATE SKIP LOCKED
    -- (with no schedule due, one index dive that finds nothing)
    KEY queue_schedules_due (paused, next_slot_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
