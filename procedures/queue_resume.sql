{% import '_pause.sql' as pause %}
-- Resumes what queue_pause paused: a group on a topic, or with p_group NULL the topic (admin,
-- operator). A group paused on its own stays paused when its topic resumes, and the reverse.
CREATE PROCEDURE queue_resume(
    {{ pause.set_paused_params() }}
)
{{ pause.set_paused_body(0) }}
