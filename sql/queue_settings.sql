-- Database-wide switches only an admin sets (no routine writes them, no role below admin has a
-- table privilege). ('test_clock', 'on') lets the routines honour a caller's p_now (tests only).
CREATE TABLE IF NOT EXISTS queue_settings (
    setting VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    value VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (setting)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
