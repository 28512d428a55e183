-- Per group and partition: which subscriber holds it, since when, until when, and its epoch.
-- lease_epoch moves on every change of holder; a subscriber that lost a lease fetches nothing (G4).
CREATE TABLE IF NOT EXISTS queue_partition_leases (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_id BIGINT NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    leased_by VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    lease_epoch BIGINT NOT NULL DEFAULT 0,
    leased_at BIGINT NULL,
    renewed_at BIGINT NULL,
    expires_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (group_name, partition_id),
    -- lease tick and fetch: the leases of one group's topic, by holder
    KEY queue_partition_leases_by_holder (group_name, topic, leased_by)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
