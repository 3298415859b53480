"""Unknown URLs: JSON 404 under /api/, the HTML page elsewhere."""

import pytest


@pytest.mark.django_db
def test_unknown_api_route_answers_json_404(staff_client):
    response = staff_client.get("/api/no-such-route")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "not_found"
    assert "/api/no-such-route" in body["detail"]
    assert body["hint"]


@pytest.mark.django_db
def test_unknown_page_answers_html_404(staff_client):
    response = staff_client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
