"""A small throwaway source tree (sql/, procedures/, migrations/) for tooling tests.

It exercises what the migration tooling must survive: ``:name`` and ``%`` and
``;`` inside routine bodies, Jinja macros imported from ``_macros.sql``, a
foreign key to a table that sorts later, a function, a SIGNAL and an event.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/helpers/ -> the checkout

TABLES = {
    "queue_alpha": """-- sample table referencing a table that sorts after it
-- (a comment with a colon: and 100% and a ; too)
CREATE TABLE IF NOT EXISTS queue_alpha (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  topic VARCHAR(191) NOT NULL COMMENT 'topic: the name, 100%',
  payload LONGBLOB NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY ix_alpha_topic (topic),
  CONSTRAINT fk_alpha_topic FOREIGN KEY (topic) REFERENCES queue_zeta (topic)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
""",
    "queue_zeta": """-- sample topics table
CREATE TABLE IF NOT EXISTS queue_zeta (
  topic VARCHAR(191) NOT NULL,
  partitions INT NOT NULL DEFAULT 4,
  PRIMARY KEY (topic)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
""",
}

EVENTS = {
    "queue_sample_gc_event": """-- housekeeping
CREATE EVENT queue_sample_gc_event
ON SCHEDULE EVERY 1 HOUR
DO CALL queue_sample_gc(NULL);
""",
}

MACROS = """{# shared fragments #}
{% macro now_ms() -%}
CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
{%- endmacro %}
{% macro require(param) -%}
IF {{ param }} IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{ param }} must not be NULL';
  END IF;
{%- endmacro %}
"""

PROCEDURES = {
    "queue_version": """-- schema version
CREATE FUNCTION queue_version() RETURNS VARCHAR(32)
DETERMINISTIC NO SQL
BEGIN
  RETURN 'sample-1';
END;
""",
    "queue_sample_publish": """{% import '_macros.sql' as m %}
-- publish one message
CREATE PROCEDURE queue_sample_publish(
  IN p_topic VARCHAR(191),
  IN p_payload LONGBLOB
)
BEGIN
  {{ m.require('p_topic') }}
  INSERT IGNORE INTO queue_zeta (topic) VALUES (p_topic);
  INSERT INTO queue_alpha (topic, payload) VALUES (p_topic, p_payload);
  SELECT LAST_INSERT_ID() AS `offset`, 0 AS duplicate, {{ m.now_ms() }} > 0 AS ok;
END
""",
    "queue_sample_gc": """{% import '_macros.sql' as m %}
CREATE PROCEDURE queue_sample_gc(IN p_limit INT)
BEGIN
  DECLARE v_i INT DEFAULT 0;
  {% for n in [1, 2] %}
  SET v_i = v_i + {{ n }};
  {% endfor %}
  WHILE v_i < 10 DO
    SET v_i = v_i + 1;
  END WHILE;
  SELECT v_i AS n, ':name' AS colon, '100%' AS pct, 'a;b' AS semi, 'it''s' AS quote;
END
""",
}


def write_sample_tree(root: Path) -> Path:
    """Write the sample sources to ``root`` with the repository's migrations/env.py."""
    (root / "sql").mkdir(parents=True, exist_ok=True)
    (root / "procedures").mkdir(parents=True, exist_ok=True)
    (root / "migrations" / "versions").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "migrations" / "env.py", root / "migrations" / "env.py")
    for name, text in {**TABLES, **EVENTS}.items():
        (root / "sql" / f"{name}.sql").write_text(text)
    (root / "procedures" / "_macros.sql").write_text(MACROS)
    for name, text in PROCEDURES.items():
        (root / "procedures" / f"{name}.sql").write_text(text)
    return root


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy the schema sources and migrations of ``src`` (no caches) to ``dst``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("sql", "procedures", "migrations"):
        if (src / part).is_dir():
            shutil.copytree(src / part, dst / part, ignore=ignore)
    return dst
