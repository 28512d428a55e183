-- When maintenance last ran and may next run: one row per job ('maintenance'). Whoever calls
-- queue_maintenance_tick first once next_run_at has passed runs it (a subscriber or the event).
CREATE TABLE IF NOT EXISTS queue_maintenance_schedule (
    job VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    next_run_at BIGINT NOT NULL,
    last_run_at BIGINT NULL,
    last_run_by VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    PRIMARY KEY (job)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
