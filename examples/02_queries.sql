-- Persistent queries: their schemas are derived from the SELECT.
CREATE STREAM pageviews_female AS
    SELECT users.user_id AS user_id, page_id, regionid
    FROM pageviews LEFT JOIN users ON pageviews.user_id = users.user_id
    WHERE gender = 'FEMALE'
    EMIT CHANGES;

CREATE TABLE pageviews_per_page AS
    SELECT page_id, COUNT(*) AS views
    FROM pageviews
    GROUP BY page_id
    EMIT CHANGES;
